/**
 * A namespace's jobs: name, owner, phase, GPUs and age; why a job waits or
 * failed, in plain words; cancel for one's own jobs; the log tail on demand.
 */

import * as React from 'react';

import {
  canCancel,
  canRetry,
  elasticLines,
  explainJob,
  jobsShownLine,
  memoryLine,
  stalledLine
} from '../jobs';
import { asModelError, QuotaModel } from '../model';
import { ageSeconds, formatAge } from '../quantity';
import { IJob } from '../tokens';
import { LogViewer } from './LogViewer';

export interface IJobsViewProps {
  model: QuotaModel;
  namespace: string;
  now: number;
  tailLines: number;
  /** Ask the user to confirm; resolves true to go on. */
  confirm: (title: string, body: string) => Promise<boolean>;
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
  const [busy, setBusy] = React.useState(false);
  const [error, setError] = React.useState('');
  const line = jobsShownLine(shown, model.olderJobs(namespace));
  if (!line) {
    return null;
  }
  const showMore = async () => {
    setBusy(true);
    setError('');
    try {
      await model.showMoreJobs(namespace);
    } catch (e) {
      setError(asModelError(e).message);
    } finally {
      setBusy(false);
    }
  };
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
          disabled={busy}
          onClick={() => void showMore()}
        >
          {busy ? 'Loading…' : 'Show more'}
        </button>
      )}
      {error && (
        <p className="jp-QuotaJob-error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

function JobItem(props: IJobsViewProps & { job: IJob }): JSX.Element {
  const { job, model, now } = props;
  const [logsOpen, setLogsOpen] = React.useState(false);
  const [error, setError] = React.useState('');
  const [busy, setBusy] = React.useState(false);
  const explanation = explainJob(job);
  const stalled = stalledLine(job);
  const memory = memoryLine(job);
  const [retried, setRetried] = React.useState('');
  const elastic = elasticLines(job);
  const logId = `jp-QuotaJob-log-${job.namespace}-${job.name}`;

  const cancel = async () => {
    const ok = await props.confirm(
      'Cancel job?',
      `Cancel ${job.name} in ${job.namespace}? Its process is stopped and its GPUs are released.`
    );
    if (!ok) {
      return;
    }
    setBusy(true);
    setError('');
    try {
      await model.cancel(job.namespace, job.name);
    } catch (e) {
      setError(asModelError(e).message);
    } finally {
      setBusy(false);
    }
  };

  const retry = async () => {
    setBusy(true);
    setError('');
    try {
      const next = await model.retry(job.namespace, job.name);
      setRetried(next.name);
    } catch (e) {
      setError(asModelError(e).message);
    } finally {
      setBusy(false);
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
        <span className={`jp-QuotaJob-phase jp-mod-${job.phase.toLowerCase()}`}>
          {job.phase}
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
      {elastic.length > 0 && (
        <ul className="jp-QuotaJob-elastic" aria-label={`${job.name} history`}>
          {elastic.map((line, i) => (
            <li key={i}>{line}</li>
          ))}
        </ul>
      )}
      {error && (
        <p className="jp-QuotaJob-error" role="alert">
          {error}
        </p>
      )}
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
            disabled={busy}
            onClick={() => void retry()}
          >
            Retry smaller
          </button>
        )}
        {canCancel(job, model.identity) && (
          <button
            type="button"
            className="jp-mod-styled jp-QuotaButton jp-mod-warn"
            aria-label={`Cancel ${job.name}`}
            disabled={busy}
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
