/**
 * What the planner form reads from the server, and how it settles each
 * answer: the client interface, one GPU's memory, the model catalog, and the
 * `Answer` of an endpoint that may not exist on this server yet.
 */

import * as React from 'react';

import { IModelSuggestion, modelSuggestions } from '../catalog';
import { asModelError } from '../model';
import { parseQuantity } from '../quantity';
import { IEstimate, IInventory, IModelList, IPlanResult } from '../tokens';
import { IVerificationClient } from './PlanVerification';

export interface IPlannerClient extends IVerificationClient {
  estimate(args: string[], gpus: number): Promise<IEstimate>;
  plan(namespace: string, args: string[]): Promise<IPlanResult>;
  inventory(): Promise<IInventory>;
  models(): Promise<IModelList>;
}

/** An answer from an endpoint that may not exist on this server yet. */
export type Answer<T> =
  | { kind: 'ok'; value: T }
  | { kind: 'unavailable'; message: string }
  | { kind: 'error'; message: string };

/**
 * Settle a request: a 404 from a server without the route (or a 501) is
 * `unavailable`, any other failure an `error` with the API's message.
 */
export async function answer<T>(promise: Promise<T>): Promise<Answer<T>> {
  try {
    return { kind: 'ok', value: await promise };
  } catch (e) {
    const error = asModelError(e);
    if (error.reason === 'ServerExtensionMissing' || error.status === 501) {
      return {
        kind: 'unavailable',
        message:
          'This server has no estimator or planner yet (the route answered ' +
          `${error.status}); upgrade jupyter_quota to plan here. "Launch as written" still submits.`
      };
    }
    return { kind: 'error', message: error.message };
  }
}

/** The catalog from the server; the static list until it answers, or if it cannot. */
export function useModelSuggestions(
  client: IPlannerClient
): IModelSuggestion[] {
  const [suggestions, setSuggestions] = React.useState(() =>
    modelSuggestions(null)
  );
  React.useEffect(() => {
    client.models().then(
      list => setSuggestions(modelSuggestions(list.models)),
      () => setSuggestions(modelSuggestions(null))
    );
  }, [client]);
  return suggestions;
}

/** One GPU's memory in bytes, from the inventory (null until read or unknown). */
export function useGpuMemory(client: IPlannerClient): number | null {
  const [memory, setMemory] = React.useState<number | null>(null);
  React.useEffect(() => {
    client.inventory().then(
      inv => {
        const text = inv.gpus?.[0]?.memory;
        setMemory(text ? parseQuantity(text) : null);
      },
      () => setMemory(null)
    );
  }, [client]);
  return memory;
}
