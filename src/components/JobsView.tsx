/**
 * A namespace's jobs: name, owner, phase, GPUs and age; why a job waits or
 * failed, in plain words; cancel for one's own jobs; the log tail on demand;
 * Serve on a finished fine-tune, and an endpoint's phase, URL, models and Stop.
 */

import * as React from 'react';

import {
  canCancel,
  canRetry,
  elasticLines,
  explainJob,
  jobsShownLine,
  memoryLine,
  phaseLabel,
  stalledLine
} from '../jobs';
import { canServe, isEndpoint } from '../endpoints';
import { QuotaModel } from '../model';
import { ageSeconds, formatAge } from '../quantity';
import { IJob } from '../tokens';
import { EndpointView } from './EndpointView';
import { LogViewer } from './LogViewer';
import { TaskError, useTask } from './task';

export interface IJobsViewProps {
  model: QuotaModel;
  namespace: string;
  now: number;
  tailLines: number;
  /** Ask the user to confirm; resolves true to go on. */
  confirm: (title: string, body: string, action?: string) => Promise<boolean>;
  /** Milliseconds between reads of an endpoint not Ready yet (`EndpointView`). */
  endpointInterval?: number;
}

export function JobsView(props: IJobsViewProps): JSX.Element {
  const { model, namespace } = props;
  const jobs = model.jobs(namespace);
  const headingId = `jp-QuotaSidebar-jobs-${namespace}`;
  return (
    <section
      className="jp-QuotaSidebar-jobs"
      aria-labelledby={headingId}
      data-namespace={namespace}
    >
      <h4 id={headingId}>Jobs in {namespace}</h4>
      {jobs.length === 0 ? (
        <p className="jp-QuotaSidebar-empty">No jobs yet.</p>
      ) : (
        <ul className="jp-QuotaJobs" aria-labelledby={headingId}>
          {jobs.map(job => (
            <JobItem key={job.name} job={job} {...props} />
          ))}
        </ul>
      )}
      <OlderJobs model={model} namespace={namespace} shown={jobs.length} />
    </section>
  );
}

/**
 * How many jobs the list leaves out, and a button that shows the next page.
 */
function OlderJobs(props: {
  model: QuotaModel;
  namespace: string;
  shown: number;
}): JSX.Element | null {
  const { model, namespace, shown } = props;
  const more = useTask(() => model.showMoreJobs(namespace));
  const line = jobsShownLine(shown, model.olderJobs(namespace));
  if (!line) {
    return null;
  }
  return (
    <div className="jp-QuotaJobs-older">
      <p className="jp-QuotaJobs-shown" role="status">
        {line}
      </p>
      {model.canShowMoreJobs(namespace) && (
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          aria-label={`Show older jobs in ${namespace}`}
          disabled={more.busy}
          onClick={() => void more.run()}
        >
          {more.busy ? 'Loading…' : 'Show more'}
        </button>
      )}
      <TaskError
        className="jp-QuotaJob-error"
        error={more.error}
        onRetry={() => void more.retry()}
        retryLabel={`Show older jobs in ${namespace} again`}
      />
    </div>
  );
}

function JobItem(props: IJobsViewProps & { job: IJob }): JSX.Element {
  const { job, model, now } = props;
  const [logsOpen, setLogsOpen] = React.useState(false);
  const explanation = explainJob(job);
  const stalled = stalledLine(job);
  const memory = memoryLine(job);
  const phase = phaseLabel(job);
  const [retried, setRetried] = React.useState('');
  const [served, setServed] = React.useState('');
  const elastic = elasticLines(job);
  const logId = `jp-QuotaJob-log-${job.namespace}-${job.name}`;
  // One runner for both actions: one busy flag, one failure line, one retry.
  const action = useTask(async (what: 'cancel' | 'retry' | 'serve') => {
    if (what === 'cancel') {
      await model.cancel(job.namespace, job.name);
    } else if (what === 'serve') {
      setServed((await model.serve(job.namespace, job)).name);
    } else {
      setRetried((await model.retry(job.namespace, job.name)).name);
    }
  });

  const cancel = async () => {
    const ok = await props.confirm(
      'Cancel job?',
      `Cancel ${job.name} in ${job.namespace}? Its process is stopped and its GPUs are released.`
    );
    if (ok) {
      await action.run('cancel');
    }
  };

  return (
    <li
      className="jp-QuotaJob"
      data-job={job.name}
      data-phase={job.phase}
      data-stalled={stalled ? job.stalled?.reason : undefined}
    >
      <div className="jp-QuotaJob-head">
        <span className="jp-QuotaJob-name">{job.name}</span>
        {stalled && (
          <span className="jp-QuotaJob-stalledFlag" title={stalled}>
            Stalled
          </span>
        )}
        <span
          className={`jp-QuotaJob-phase jp-mod-${phase.level}`}
          title={phase.text === job.phase ? undefined : `phase ${job.phase}`}
        >
          {phase.text}
        </span>
      </div>
      <div className="jp-QuotaJob-meta">
        <span title="owner">{job.owner}</span> · {job.gpus}{' '}
        {job.gpus === 1 ? 'GPU' : 'GPUs'} ·{' '}
        <span title={`created ${job.createdAt}`}>
          {formatAge(ageSeconds(job.createdAt, now))} old
        </span>
      </div>
      {memory && (
        <div className="jp-QuotaJob-memory" title="GPU memory per GPU">
          {memory}
        </div>
      )}
      {explanation && <p className="jp-QuotaJob-reason">{explanation}</p>}
      {stalled && <p className="jp-QuotaJob-stalled">{stalled}</p>}
      {retried && (
        <p className="jp-QuotaJob-retried" role="status">
          Retried as {retried} with the next plan down.
        </p>
      )}
      {served && (
        <p className="jp-QuotaJob-served" role="status">
          Serving its last checkpoint as endpoint {served}.
        </p>
      )}
      {isEndpoint(job) && (
        <EndpointView
          model={model}
          job={job}
          interval={props.endpointInterval}
          confirm={props.confirm}
        />
      )}
      {elastic.length > 0 && (
        <ul className="jp-QuotaJob-elastic" aria-label={`${job.name} history`}>
          {elastic.map((line, i) => (
            <li key={i}>{line}</li>
          ))}
        </ul>
      )}
      <TaskError
        className="jp-QuotaJob-error"
        error={action.error}
        onRetry={() => void action.retry()}
        retryLabel={`Try again: ${job.name}`}
      />
      <div className="jp-QuotaJob-actions">
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          aria-expanded={logsOpen}
          aria-controls={logId}
          aria-label={`${logsOpen ? 'Hide' : 'Show'} log of ${job.name}`}
          onClick={() => setLogsOpen(!logsOpen)}
        >
          {logsOpen ? 'Hide log' : 'Log'}
        </button>
        {canRetry(job, model.identity) && !retried && (
          <button
            type="button"
            className="jp-mod-styled jp-QuotaButton"
            aria-label={`Retry ${job.name} with the next plan down`}
            title="It ran out of GPU memory: submit the best plan that remains"
            disabled={action.busy}
            onClick={() => void action.run('retry')}
          >
            Retry smaller
          </button>
        )}
        {canServe(job, model.identity) && (
          <button
            type="button"
            className="jp-mod-styled jp-QuotaButton"
            aria-label={`Serve ${job.name}`}
            title="Serve its last checkpoint as an endpoint (swift deploy) under the team's quota"
            disabled={action.busy}
            onClick={() => void action.run('serve')}
          >
            Serve
          </button>
        )}
        {canCancel(job, model.identity) && !isEndpoint(job) && (
          <button
            type="button"
            className="jp-mod-styled jp-QuotaButton jp-mod-warn"
            aria-label={`Cancel ${job.name}`}
            disabled={action.busy}
            onClick={() => void cancel()}
          >
            Cancel
          </button>
        )}
      </div>
      {logsOpen && (
        <LogViewer
          id={logId}
          model={model}
          job={job}
          tailLines={props.tailLines}
        />
      )}
    </li>
  );
}
