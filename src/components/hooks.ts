/**
 * React hooks shared by the sidebar's components.
 */

import { ISignal } from '@lumino/signaling';
import * as React from 'react';

import { asModelError, QuotaModel } from '../model';

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
 * The value `load` resolves to, loaded again whenever `deps` change while
 * `enabled`, and on `retry()`; a load that a newer one overtook is dropped.
 * `error` holds the last failure's message (the last value stays shown).
 * Nothing is loaded until `enabled` is first true.
 */
export function useLoad<T>(
  load: () => Promise<T>,
  deps: React.DependencyList,
  enabled = true
): { value: T | null; error: string; loading: boolean; retry: () => void } {
  const [state, setState] = React.useState<{
    value: T | null;
    error: string;
    loading: boolean;
  }>({ value: null, error: '', loading: enabled });
  const [asked, setAsked] = React.useState(0);
  React.useEffect(() => {
    if (!enabled) {
      return;
    }
    let current = true;
    setState(s => ({ ...s, loading: true }));
    load().then(
      value => current && setState({ value, error: '', loading: false }),
      (error: unknown) =>
        current &&
        setState(s => ({
          value: s.value,
          error: asModelError(error).message,
          loading: false
        }))
    );
    return () => {
      current = false;
    };
    // The caller names what `load` depends on, as with useEffect.
  }, [...deps, enabled, asked]);
  const retry = React.useCallback(() => setAsked(n => n + 1), []);
  return { ...state, retry };
}

/**
 * Whether the element is on screen: in the viewport, and not inside a hidden
 * panel or scrolled out of its panel's view (an IntersectionObserver).
 */
export function useOnScreen(ref: React.RefObject<Element>): boolean {
  const [onScreen, setOnScreen] = React.useState(false);
  React.useEffect(() => {
    const element = ref.current;
    if (!element || typeof IntersectionObserver === 'undefined') {
      setOnScreen(true);
      return;
    }
    const observer = new IntersectionObserver(entries =>
      setOnScreen(entries[entries.length - 1].isIntersecting)
    );
    observer.observe(element);
    return () => observer.disconnect();
  }, [ref]);
  return onScreen;
}

/**
 * A count that goes up every `interval` ms while `active` (a dependency that
 * makes `useLoad` read again; `useLoad`'s `enabled` covers the return to view).
 */
export function useTick(interval: number, active: boolean): number {
  const [tick, setTick] = React.useState(0);
  React.useEffect(() => {
    if (!active) {
      return;
    }
    const timer = setInterval(() => setTick(t => t + 1), interval);
    return () => clearInterval(timer);
  }, [interval, active]);
  return tick;
}
