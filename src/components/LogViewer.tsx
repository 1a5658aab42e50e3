/**
 * The tail of a job's log, read again on every poll while the job runs.
 */

import * as React from 'react';

import { QuotaModel } from '../model';
import { IJob } from '../tokens';
import { useLoad } from './hooks';

export interface ILogViewerProps {
  id: string;
  model: QuotaModel;
  job: IJob;
  tailLines: number;
}

export function LogViewer(props: ILogViewerProps): JSX.Element {
  const { model, job, tailLines } = props;
  const live = job.phase === 'Running' || job.phase === 'Pending';
  // Re-read with each poll while the job is live; once after it ends.
  const tick = live ? model.generation : job.phase;
  const logs = useLoad(
    () => model.logs(job.namespace, job.name, tailLines),
    [job.namespace, job.name, tailLines, tick]
  );
  const text = logs.value === null ? null : logs.value.logs;

  return (
    <div className="jp-QuotaLog">
      <div className="jp-QuotaLog-head">
        <span>Last {tailLines} lines</span>
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          aria-label={`Reload log of ${job.name}`}
          onClick={logs.retry}
        >
          Reload
        </button>
      </div>
      {logs.error ? (
        <p className="jp-QuotaJob-error" role="alert">
          {logs.error}
        </p>
      ) : (
        <pre
          id={props.id}
          className="jp-QuotaLog-text"
          role="log"
          aria-label={`Log of ${job.name}`}
          tabIndex={0}
        >
          {text === null ? 'Loading…' : text || '(no output yet)'}
        </pre>
      )}
    </div>
  );
}
