/**
 * The tail of a job's log, read again on every poll while the job runs.
 */

import * as React from 'react';

import { asModelError, QuotaModel } from '../model';
import { IJob } from '../tokens';

export interface ILogViewerProps {
  id: string;
  model: QuotaModel;
  job: IJob;
  tailLines: number;
}

export function LogViewer(props: ILogViewerProps): JSX.Element {
  const { model, job, tailLines } = props;
  const [text, setText] = React.useState<string | null>(null);
  const [error, setError] = React.useState('');
  const [reloads, setReloads] = React.useState(0);
  const live = job.phase === 'Running' || job.phase === 'Pending';
  // Re-read with each poll while the job is live; once after it ends.
  const tick = live ? model.generation : job.phase;

  React.useEffect(() => {
    let cancelled = false;
    model.logs(job.namespace, job.name, tailLines).then(
      logs => {
        if (!cancelled) {
          setText(logs.logs);
          setError('');
        }
      },
      e => {
        if (!cancelled) {
          setError(asModelError(e).message);
        }
      }
    );
    return () => {
      cancelled = true;
    };
  }, [job.namespace, job.name, tailLines, tick, reloads]);

  return (
    <div className="jp-QuotaLog">
      <div className="jp-QuotaLog-head">
        <span>Last {tailLines} lines</span>
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          aria-label={`Reload log of ${job.name}`}
          onClick={() => setReloads(reloads + 1)}
        >
          Reload
        </button>
      </div>
      {error ? (
        <p className="jp-QuotaJob-error" role="alert">
          {error}
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
