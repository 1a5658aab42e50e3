/**
 * An endpoint in the jobs list: its phase, URL, the models it serves, the
 * memory it holds, and Stop. Its job says when it runs; whether its server
 * answers (`Starting` -> `Ready`) only the endpoint says, so it is read again
 * every `interval` ms while it is Pending or Starting, and on each change of
 * its job.
 */

import * as React from 'react';

import {
  canStop,
  endpointMemory,
  endpointPhaseLine,
  endpointUrl,
  WAITING_PHASES
} from '../endpoints';
import { QuotaModel } from '../model';
import { IEndpoint, IJob } from '../tokens';
import { TaskError, useTask } from './task';

/** Milliseconds between two reads of an endpoint that is not Ready yet. */
export const ENDPOINT_INTERVAL = 2000;

export interface IEndpointViewProps {
  model: QuotaModel;
  job: IJob;
  interval?: number;
  /** Ask the user to confirm; resolves true to go on. */
  confirm: (title: string, body: string, action?: string) => Promise<boolean>;
}

export function EndpointView(props: IEndpointViewProps): JSX.Element {
  const { model, job } = props;
  const interval = props.interval ?? ENDPOINT_INTERVAL;
  const [endpoint, setEndpoint] = React.useState<IEndpoint | null>(null);
  const read = useTask(async () => {
    setEndpoint(await model.endpoint(job.namespace, job.name));
  });
  const stop = useTask(async () => {
    setEndpoint(await model.stopEndpoint(job.namespace, job.name));
  });
  const { run } = read;
  React.useEffect(() => {
    void run();
  }, [run, job.phase, job.reason, job.startedAt]);
  const waiting = !!endpoint && WAITING_PHASES.includes(endpoint.phase);
  React.useEffect(() => {
    if (!waiting) {
      return;
    }
    const timer = setTimeout(() => void run(), interval);
    return () => clearTimeout(timer);
  }, [run, waiting, endpoint, interval]);

  const onStop = async () => {
    const ok = await props.confirm(
      'Stop endpoint?',
      `Stop ${job.name} in ${job.namespace}? Its server is stopped and its quota is given back.`,
      'Stop endpoint'
    );
    if (ok) {
      await stop.run();
    }
  };

  const url = endpoint ? endpointUrl(endpoint, window.location.origin) : '';
  return (
    <div
      className="jp-QuotaEndpoint"
      data-endpoint-phase={endpoint?.phase}
      aria-label={`Endpoint ${job.name}`}
      role="group"
    >
      {endpoint && (
        <>
          <p className="jp-QuotaEndpoint-phase" role="status">
            {endpointPhaseLine(endpoint)}
          </p>
          {endpoint.phase === 'Ready' && (
            <p className="jp-QuotaEndpoint-url">
              <a
                href={url}
                target="_blank"
                rel="noreferrer"
                title="OpenAI-compatible API"
              >
                {url}
              </a>
            </p>
          )}
          <p
            className="jp-QuotaEndpoint-memory"
            title="What it holds of the quota"
          >
            {endpointMemory(endpoint)}
          </p>
        </>
      )}
      <TaskError
        className="jp-QuotaJob-error"
        error={read.error || stop.error}
        onRetry={() => void (stop.error ? stop.retry() : read.retry())}
        retryLabel={`Try again: endpoint ${job.name}`}
      />
      {canStop(job, model.identity) && (
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton jp-mod-warn"
          aria-label={`Stop endpoint ${job.name}`}
          disabled={stop.busy}
          onClick={() => void onStop()}
        >
          Stop
        </button>
      )}
    </div>
  );
}
