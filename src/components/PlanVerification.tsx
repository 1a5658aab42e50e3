/**
 * A recommended plan's verification (docs/estimator.md §14.3): on request the
 * server runs one simulated training step of the plan's argv in the background
 * (`POST verifications`); this reads it again every `POLL_MS` and shows its
 * peak beside the plan's estimate when it arrives.
 */

import * as React from 'react';

import { asModelError } from '../model';
import { IEstimate, IVerification } from '../tokens';

export interface IVerificationClient {
  startVerification(args: string[], gpus: number): Promise<IVerification>;
  verification(id: string): Promise<IVerification>;
}

/** How often a running verification is read again, in milliseconds. */
export const POLL_MS = 2000;

const GIB = 2 ** 30;

export interface IPlanVerificationProps {
  client: IVerificationClient;
  args: string[];
  gpus: number;
  estimate: IEstimate | null;
  /** How often a running verification is read again (default `POLL_MS`). */
  pollMs?: number;
}

type State =
  | { kind: 'idle' }
  | { kind: 'running'; since: number; verification: IVerification | null }
  | { kind: 'settled'; verification: IVerification }
  | { kind: 'error'; message: string };

function next(v: IVerification, since: number): State {
  return v.state === 'running'
    ? { kind: 'running', since, verification: v }
    : { kind: 'settled', verification: v };
}

export function PlanVerification(props: IPlanVerificationProps): JSX.Element {
  const { client, args, gpus } = props;
  const pollMs = props.pollMs ?? POLL_MS;
  const [state, setState] = React.useState<State>({ kind: 'idle' });
  const [now, setNow] = React.useState(() => Date.now());
  const plan = `${gpus}\u0000${args.join('\u0000')}`;
  const current = React.useRef(plan);
  current.current = plan;

  // Another plan starts over; an answer for the one before is dropped below.
  React.useEffect(() => setState({ kind: 'idle' }), [plan]);

  React.useEffect(() => {
    if (state.kind !== 'running' || state.verification === null) {
      return;
    }
    let cancelled = false;
    const { id } = state.verification;
    const timer = window.setTimeout(() => {
      client.verification(id).then(
        v => {
          if (!cancelled) {
            setNow(Date.now());
            setState(next(v, state.since));
          }
        },
        e => {
          if (!cancelled) {
            setState({ kind: 'error', message: asModelError(e).message });
          }
        }
      );
    }, pollMs);
    return () => {
      cancelled = true;
      window.clearTimeout(timer);
    };
  }, [state, client, pollMs]);

  const start = () => {
    const since = Date.now();
    const asked = plan;
    setNow(since);
    setState({ kind: 'running', since, verification: null });
    client.startVerification(args, gpus).then(
      v => {
        if (current.current === asked) {
          setState(next(v, since));
        }
      },
      e => {
        if (current.current === asked) {
          setState({ kind: 'error', message: asModelError(e).message });
        }
      }
    );
  };

  const again = (
    <button type="button" className="jp-QuotaPlan-verify" onClick={start}>
      Try again
    </button>
  );
  return (
    <div className="jp-QuotaPlan-verification" aria-live="polite">
      {state.kind === 'idle' && (
        <button
          type="button"
          className="jp-QuotaPlan-verify"
          onClick={start}
          title="Runs one training step of the real model code on fake tensors on the server (no GPU): tens of seconds"
        >
          Verify with a simulated step
        </button>
      )}
      {state.kind === 'running' && (
        <p role="status" className="jp-QuotaPlan-verifying">
          Simulating one training step on the server…{' '}
          {Math.max(0, Math.round((now - state.since) / 1000))} s
        </p>
      )}
      {state.kind === 'settled' && (
        <Settled verification={state.verification} estimate={props.estimate}>
          {state.verification.state === 'failed' ? again : null}
        </Settled>
      )}
      {state.kind === 'error' && (
        <p className="jp-QuotaPlan-verification-error">
          {state.message} {again}
        </p>
      )}
    </div>
  );
}

function gib(bytes: number): string {
  return (bytes / GIB).toFixed(2);
}

function signed(bytes: number): string {
  return (bytes >= 0 ? '+' : '') + gib(bytes);
}

function Settled(props: {
  verification: IVerification;
  estimate: IEstimate | null;
  children: React.ReactNode;
}): JSX.Element {
  const { verification: v, estimate } = props;
  const r = v.result;
  if (v.state !== 'done' || !r) {
    const what = v.state === 'unsupported' ? 'Not verified' : 'Failed';
    return (
      <p className="jp-QuotaPlan-verification-error">
        {what}: {v.reason} {props.children}
      </p>
    );
  }
  const versus =
    estimate && estimate.peakBytesPerGpu > 0
      ? r.peakBytesPerGpu / estimate.peakBytesPerGpu - 1
      : null;
  return (
    <p className="jp-QuotaPlan-verified">
      Simulated step: <strong>{gib(r.peakBytesPerGpu)} GiB</strong> per GPU
      {versus !== null &&
        ` (${versus >= 0 ? '+' : ''}${Math.round(versus * 100)}% of the estimate)`}
      . Live tensors {gib(r.liveBytes)} GiB at the {r.peakPhase}; the allocator
      model reserves {gib(r.reservedBytes)} GiB
      {r.foreachBytes > 0 &&
        `, a foreach AdamW update ${gib(r.foreachBytes)} GiB more`}
      ; measured runs add {signed(r.workspaceBytes)} GiB to their simulated
      steps (median) for what no tensor shows. ({r.regime},{' '}
      {Math.round(r.seconds)} s)
    </p>
  );
}
