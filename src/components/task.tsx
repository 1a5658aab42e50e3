/**
 * One runner for the views' async actions (cancel, retry, submit, decide,
 * show more): it keeps whether the action is running and why it last failed,
 * and runs the last call again on "Try again". jupyterlab-git's
 * `taskhandler.ts` is the model; this is its React-hook form, one per action.
 */

import * as React from 'react';

import { asModelError } from '../model';

export interface ITask<A extends unknown[]> {
  /** Run the action; resolves true when it succeeded. A call while busy is dropped. */
  run: (...args: A) => Promise<boolean>;
  /** Run the last call again (after a failure). */
  retry: () => Promise<boolean>;
  /** Forget the last failure (e.g. when the form it was about changes). */
  reset: () => void;
  busy: boolean;
  /** The API's message of the last failure; '' after a success. */
  error: string;
}

export function useTask<A extends unknown[]>(
  action: (...args: A) => Promise<unknown>
): ITask<A> {
  const [state, setState] = React.useState({ busy: false, error: '' });
  const latest = React.useRef(action);
  latest.current = action;
  const running = React.useRef(false);
  const mounted = React.useRef(true);
  const lastArgs = React.useRef<A | null>(null);
  React.useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);

  const run = React.useCallback(async (...args: A): Promise<boolean> => {
    if (running.current) {
      return false;
    }
    running.current = true;
    lastArgs.current = args;
    setState({ busy: true, error: '' });
    let error = '';
    try {
      await latest.current(...args);
    } catch (e) {
      error = asModelError(e).message;
    } finally {
      running.current = false;
    }
    // A view that went away (its job ended, the panel closed) is not updated.
    if (mounted.current) {
      setState({ busy: false, error });
    }
    return error === '';
  }, []);

  const retry = React.useCallback(
    () =>
      lastArgs.current ? run(...lastArgs.current) : Promise.resolve(false),
    [run]
  );
  const reset = React.useCallback(
    () => setState(s => (s.error ? { ...s, error: '' } : s)),
    []
  );
  return { run, retry, reset, busy: state.busy, error: state.error };
}

export interface ITaskErrorProps {
  /** The failure's message; nothing is drawn while it is ''. */
  error: string;
  /** Words before the message, e.g. `Could not read the requests: `. */
  prefix?: string;
  /** Run the failed action again; without it, no button. */
  onRetry?: () => void;
  /** What the retry button does, for assistive technology. */
  retryLabel?: string;
  className?: string;
}

/**
 * A failure as an alert, with "Try again" beside it (outside the alert, so
 * the alert reads as the API's message alone).
 */
export function TaskError(props: ITaskErrorProps): JSX.Element | null {
  if (!props.error) {
    return null;
  }
  const { onRetry } = props;
  return (
    <div className="jp-QuotaTaskError">
      <p className={props.className ?? 'jp-QuotaSidebar-error'} role="alert">
        {props.prefix ?? ''}
        {props.error}
      </p>
      {onRetry && (
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          aria-label={props.retryLabel}
          onClick={() => onRetry()}
        >
          Try again
        </button>
      )}
    </div>
  );
}

/** What the last action did (a status line) or why it failed (an alert). */
export function Outcome(props: {
  status: string;
  failure: string;
  statusClassName?: string;
  failureClassName?: string;
}): JSX.Element {
  return (
    <>
      {props.status && (
        <p
          className={props.statusClassName ?? 'jp-QuotaIncrease-status'}
          role="status"
        >
          {props.status}
        </p>
      )}
      {props.failure && (
        <p
          className={props.failureClassName ?? 'jp-QuotaSidebar-error'}
          role="alert"
        >
          {props.failure}
        </p>
      )}
    </>
  );
}
