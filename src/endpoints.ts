/**
 * Endpoints in the sidebar, in words: which jobs can be served, and what an
 * endpoint serves, where, and with how much memory. Pure: no I/O, no React.
 */

import { IEndpoint, IIdentity, IJob } from './tokens';

/** Endpoint phases in which it still moves on by itself (the view reads it again). */
export const WAITING_PHASES: ReadonlyArray<IEndpoint['phase']> = [
  'Pending',
  'Starting'
];

/** The `kind` of a job that is an endpoint. */
export const ENDPOINT_KIND = 'endpoint';

export function isEndpoint(job: IJob): boolean {
  return job.kind === ENDPOINT_KIND;
}

/** A finished fine-tune (not an endpoint) that a signed-in member can serve. */
export function canServe(job: IJob, identity: IIdentity | null): boolean {
  return !!identity && job.phase === 'Succeeded' && !isEndpoint(job);
}

/** Its owner or an admin may stop a live endpoint. */
export function canStop(job: IJob, identity: IIdentity | null): boolean {
  if (!identity || (job.phase !== 'Pending' && job.phase !== 'Running')) {
    return false;
  }
  return identity.admin || job.owner === identity.name;
}

/** The absolute URL of its OpenAI-compatible API (`url` is a path on this server). */
export function endpointUrl(endpoint: IEndpoint, origin: string): string {
  return new URL(endpoint.url, origin).href;
}

/** `memory 4Gi, at most 8Gi · no GPU`: what the server holds of the quota. */
export function endpointMemory(endpoint: IEndpoint): string {
  const requests = endpoint.resources.requests ?? {};
  const limits = endpoint.resources.limits ?? {};
  const parts: string[] = [];
  if (requests.memory) {
    parts.push(`memory ${requests.memory}`);
  }
  if (limits.memory && limits.memory !== requests.memory) {
    parts.push(`at most ${limits.memory}`);
  }
  const gpus =
    endpoint.gpus === 0
      ? 'no GPU (CPU)'
      : `${endpoint.gpus} ${endpoint.gpus === 1 ? 'GPU' : 'GPUs'}`;
  return [parts.join(', '), gpus].filter(Boolean).join(' · ');
}

/** One line on the endpoint's phase, in plain words. */
export function endpointPhaseLine(endpoint: IEndpoint): string {
  switch (endpoint.phase) {
    case 'Pending':
      return 'Waiting for resources';
    case 'Starting':
      return 'Starting: loading the model';
    case 'Ready':
      return endpoint.models.length
        ? `Ready, serving ${endpoint.models.join(', ')}`
        : 'Ready';
    case 'Stopped':
      return endpoint.reason === 'Idle'
        ? `Stopped: ${endpoint.message ?? 'idle'}`
        : 'Stopped';
    default:
      return `Failed${endpoint.message ? `: ${endpoint.message}` : ''}`;
  }
}
