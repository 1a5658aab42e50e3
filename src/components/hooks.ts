/**
 * React hooks shared by the sidebar's components.
 */

import { ISignal } from '@lumino/signaling';
import * as React from 'react';

import { QuotaModel } from '../model';

/**
 * Re-render on every `changed` of a model (the quota model, the profile editor).
 */
export function useChanged(source: { changed: ISignal<any, void> }): void {
  const [, setCount] = React.useState(0);
  React.useEffect(() => {
    const onChange = () => setCount(c => c + 1);
    source.changed.connect(onChange);
    return () => {
      source.changed.disconnect(onChange);
    };
  }, [source]);
}

/**
 * Re-render on every change of the model.
 */
export function useModel(model: QuotaModel): number {
  useChanged(model);
  return model.generation;
}

/**
 * The current time, updated every `interval` ms (for ages that grow).
 */
export function useNow(interval = 5000): number {
  const [now, setNow] = React.useState(Date.now());
  React.useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), interval);
    return () => clearInterval(timer);
  }, [interval]);
  return now;
}

/**
 * The value `load` resolves to, loaded again whenever `deps` change; a load
 * that a newer one overtook is dropped. `error` holds the last failure's message.
 */
export function useLoad<T>(
  load: () => Promise<T>,
  deps: React.DependencyList
): { value: T | null; error: string; loading: boolean } {
  const [state, setState] = React.useState<{
    value: T | null;
    error: string;
    loading: boolean;
  }>({ value: null, error: '', loading: true });
  React.useEffect(() => {
    let current = true;
    setState(s => ({ ...s, loading: true }));
    load().then(
      value => current && setState({ value, error: '', loading: false }),
      (error: unknown) =>
        current &&
        setState(s => ({
          value: s.value,
          error: error instanceof Error ? error.message : String(error),
          loading: false
        }))
    );
    return () => {
      current = false;
    };
    // The caller names what `load` depends on, as with useEffect.
  }, deps);
  return state;
}
