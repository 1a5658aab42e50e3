/**
 * The sidebar's model: the user's namespaces, their balances and jobs, and who
 * the user is. Changes are pushed (`GET events`, `events.ts`) while the push is
 * held; otherwise, and for the first read after the push is (re)gained, they
 * are polled from the REST API with `@lumino/polling` (backing off on errors,
 * on standby while the page is hidden; `GET namespaces` is conditional, so an
 * unchanged poll is a bodiless 304). Views only read it and listen to `changed`.
 *
 * It imports nothing from JupyterLab at run time, so it is unit-tested in
 * plain Node with a fake client.
 */

import { IDisposable } from '@lumino/disposable';
import { IPoll, Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { IPushHandlers, IPushSubscription } from './events';
import { balanceLine } from './quantity';
import {
  IApiError,
  IBalance,
  IEndpoint,
  IEndpointRequest,
  IIdentity,
  IJob,
  IJobList,
  IJobLogs,
  IJobPage,
  IJobRequest,
  INamespaceList,
  INamespaceSummary,
  IPlanResult,
  MAX_JOB_PAGE
} from './tokens';

/**
 * What the model needs from the server (`QuotaClient` in `client.ts`).
 */
export interface IQuotaClient {
  namespaces(): Promise<INamespaceList>;
  jobs(namespace: string, page?: IJobPage): Promise<IJobList>;
  identity(): Promise<IIdentity>;
  submit(namespace: string, request: IJobRequest): Promise<IJob>;
  cancel(namespace: string, name: string): Promise<IJob>;
  logs(namespace: string, name: string, tailLines: number): Promise<IJobLogs>;
  replan(namespace: string, name: string): Promise<IPlanResult>;
  createEndpoint(
    namespace: string,
    request: IEndpointRequest
  ): Promise<IEndpoint>;
  endpoint(namespace: string, name: string): Promise<IEndpoint>;
  deleteEndpoint(namespace: string, name: string): Promise<IEndpoint>;
}

/**
 * An error as the model keeps it: the HTTP status (0 when the server could
 * not be reached) and the API's `{reason, message}`.
 */
export interface IModelError extends IApiError {
  status: number;
}

/**
 * GPUs remaining and GPUs allowed in a namespace, for the status bar.
 */
export interface IGpuSummary {
  namespace: string;
  remaining: number;
  hard: number;
}

/**
 * The quota key of a namespace's GPUs: the requests of its profile's GPU
 * resource (`requests.nvidia.com/gpu` unless the profile names another).
 */
export function gpuKey(ns: INamespaceSummary): string {
  return `requests.${ns.gpuResource}`;
}

export namespace QuotaModel {
  export interface IOptions {
    client: IQuotaClient;
    /** Milliseconds between polls (default 10 s). */
    refreshInterval?: number;
    /** The poll's standby (default `when-hidden`). */
    standby?: Poll.Standby | (() => boolean | Poll.Standby);
    /** Start polling at once (default true). */
    auto?: boolean;
    /**
     * Subscribe to pushed changes (`PushSubscription` on `GET events`); while
     * the push is held the model does not poll. None: it always polls.
     */
    push?: (handlers: IPushHandlers) => IPushSubscription;
  }
}

/**
 * Polls the caller's namespaces, balances, jobs and identity.
 */
export class QuotaModel implements IDisposable {
  constructor(options: QuotaModel.IOptions) {
    this._client = options.client;
    this._interval = options.refreshInterval ?? DEFAULT_INTERVAL;
    this._poll = new Poll({
      auto: options.auto ?? true,
      factory: () => this._fetch(),
      frequency: frequencyOf(this._interval),
      name: 'jupyter-quota:QuotaModel#balance',
      standby: options.standby ?? 'when-hidden'
    });
    this._push =
      options.push?.({
        balance: balance => this._onBalance(balance),
        job: job => this._onJob(job),
        // The views that list requests read them again (`useIncreases`, the audit log).
        increase: () => this._pushed(),
        held: held => this._onHeld(held)
      }) ?? null;
  }

  /** True while changes are pushed to the model (no polls then). */
  get pushHeld(): boolean {
    return this._push?.held ?? false;
  }

  /**
   * True once the push is held and the model has read everything since: from
   * then on every change arrives by push, and nothing is polled.
   */
  get live(): boolean {
    return this.pushHeld && this._synced;
  }

  /** Emitted after every poll, successful or not, and after a job change. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The caller's namespaces with their balances, as last read. */
  get namespaces(): INamespaceSummary[] {
    return this._namespaces;
  }

  /** The caller, once read. */
  get identity(): IIdentity | null {
    return this._identity;
  }

  /** The last poll's error, or null when it succeeded. */
  get error(): IModelError | null {
    return this._error;
  }

  /** True when the API answered 404: the server extension is not there. */
  get extensionMissing(): boolean {
    return this._error?.reason === 'ServerExtensionMissing';
  }

  /** True once a poll has succeeded (the views show data, not a spinner). */
  get loaded(): boolean {
    return this._fetchedAt !== null;
  }

  /** Milliseconds since the epoch of the last successful poll. */
  get fetchedAt(): number | null {
    return this._fetchedAt;
  }

  /** How many polls have completed (views use it to refresh what they show). */
  get generation(): number {
    return this._generation;
  }

  /** Milliseconds between polls. */
  get refreshInterval(): number {
    return this._interval;
  }

  set refreshInterval(interval: number) {
    if (interval === this._interval || !(interval > 0)) {
      return;
    }
    this._interval = interval;
    this._poll.frequency = frequencyOf(interval);
  }

  /** The namespace the status bar shows ('' for the first). */
  get statusNamespace(): string {
    return this._statusNamespace;
  }

  set statusNamespace(namespace: string) {
    if (namespace !== this._statusNamespace) {
      this._statusNamespace = namespace;
      this._changed.emit();
    }
  }

  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  /** The jobs of `namespace`, newest first, as last read. */
  jobs(namespace: string): IJob[] {
    return this._jobs.get(namespace)?.jobs ?? [];
  }

  /** How many older jobs of `namespace` the list does not show (the server's `remainingItemCount`). */
  olderJobs(namespace: string): number {
    return this._jobs.get(namespace)?.metadata?.remainingItemCount ?? 0;
  }

  /** Whether `showMoreJobs` can add older jobs to `namespace`'s list. */
  canShowMoreJobs(namespace: string): boolean {
    const list = this._jobs.get(namespace);
    return !!list?.metadata?.continue && list.jobs.length < MAX_JOB_PAGE;
  }

  /**
   * Add the next page of `namespace`'s older jobs (the server's `continue`)
   * to its list; later polls keep reading that many jobs, up to the largest
   * page the server gives (`MAX_JOB_PAGE`).
   */
  async showMoreJobs(namespace: string): Promise<void> {
    const list = this._jobs.get(namespace);
    const token = list?.metadata?.continue;
    if (!list || !token || !this.canShowMoreJobs(namespace)) {
      return;
    }
    const page = await this._client.jobs(namespace, { continue: token });
    const current = this._jobs.get(namespace) ?? list;
    const names = new Set(current.jobs.map(j => j.name));
    const jobs = current.jobs.concat(page.jobs.filter(j => !names.has(j.name)));
    this._jobs.set(namespace, { jobs, metadata: page.metadata });
    this._shown.set(namespace, Math.min(jobs.length, MAX_JOB_PAGE));
    this._changed.emit();
  }

  /**
   * GPUs remaining out of GPUs allowed in the status bar's namespace (or the first),
   * or null when that namespace has no GPU quota or nothing is loaded.
   */
  gpuSummary(): IGpuSummary | null {
    const wanted = this._statusNamespace;
    const ns =
      this._namespaces.find(n => n.name === wanted) ?? this._namespaces[0];
    if (!ns) {
      return null;
    }
    const key = gpuKey(ns);
    const gpus = ns.balance.resources[key];
    if (!gpus) {
      return null;
    }
    const line = balanceLine(key, gpus);
    return { namespace: ns.name, remaining: line.remaining, hard: line.hard };
  }

  /**
   * Poll now; resolves once the new data is in.
   */
  async refresh(): Promise<void> {
    if (this.isDisposed) {
      return;
    }
    this._forced = true; // read even while the push is held (the Refresh command)
    await this._poll.refresh();
    // The tick rejects only when the model is disposed meanwhile.
    await this._poll.tick.catch(() => undefined);
  }

  /**
   * Submit a job; refreshes the balance and jobs once it is admitted.
   * Rejects with the API's error (403 with the quota's message when refused).
   */
  async submit(namespace: string, request: IJobRequest): Promise<IJob> {
    const job = await this._client.submit(namespace, request);
    this._refreshUnlessPushed();
    return job;
  }

  /**
   * Cancel a job; refreshes once the server has answered.
   */
  async cancel(namespace: string, name: string): Promise<IJob> {
    const job = await this._client.cancel(namespace, name);
    this._refreshUnlessPushed();
    return job;
  }

  /**
   * After a job ran out of GPU memory: submit the next plan down (the plan
   * search with its configuration known not to fit). Rejects with the API's
   * error, or when no smaller plan fits now.
   */
  async retry(namespace: string, name: string): Promise<IJob> {
    const result = await this._client.replan(namespace, name);
    const best = result.recommended;
    if (!best) {
      const error: IModelError = {
        status: 409,
        reason: 'NoSmallerPlan',
        message: `No smaller plan fits ${namespace} now: wait for GPUs to free up, or lower --max_length.`
      };
      throw error;
    }
    const request: IJobRequest = { args: best.args, gpus: best.gpus };
    if (best.resources) {
      request.resources = best.resources;
    }
    return this.submit(namespace, request);
  }

  /**
   * Serve the last checkpoint of `job`, a finished fine-tune (`POST
   * namespaces/{ns}/endpoints` with `job`): on one GPU if it trained on GPUs,
   * else on CPUs; refreshes once it is admitted.
   */
  async serve(namespace: string, job: IJob): Promise<IEndpoint> {
    const endpoint = await this._client.createEndpoint(namespace, {
      job: job.name,
      gpus: Math.min(job.gpus, 1)
    });
    this._refreshUnlessPushed();
    return endpoint;
  }

  /** An endpoint as the server sees it now: its phase, URL and models. */
  endpoint(namespace: string, name: string): Promise<IEndpoint> {
    return this._client.endpoint(namespace, name);
  }

  /** Stop an endpoint; refreshes once the server has answered. */
  async stopEndpoint(namespace: string, name: string): Promise<IEndpoint> {
    const endpoint = await this._client.deleteEndpoint(namespace, name);
    this._refreshUnlessPushed();
    return endpoint;
  }

  /** The tail of a job's log. */
  logs(namespace: string, name: string, tailLines: number): Promise<IJobLogs> {
    return this._client.logs(namespace, name, tailLines);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._push?.dispose();
    // Stopping clears the scheduled timer, which disposing alone leaves behind.
    void this._poll.stop();
    this._poll.dispose();
    Signal.clearData(this);
  }

  /**
   * One poll: identity (until known), namespaces, then each namespace's jobs.
   * Rethrows so that the poll backs off.
   */
  private async _fetch(): Promise<void> {
    const held = this.pushHeld;
    if (held && this._synced && !this._forced) {
      return; // the push carries every change: nothing to ask
    }
    this._forced = false;
    try {
      if (!this._identity) {
        this._identity = await this._client.identity();
      }
      const list = await this._client.namespaces();
      // As many jobs as the list shows: the first page, or more once "Show more" was used.
      const jobs = await Promise.all(
        list.namespaces.map(ns => {
          const limit = this._shown.get(ns.name);
          return this._client.jobs(ns.name, limit ? { limit } : undefined);
        })
      );
      this._namespaces = list.namespaces;
      this._jobs = new Map(list.namespaces.map((ns, i) => [ns.name, jobs[i]]));
      this._error = null;
      this._fetchedAt = Date.now();
      this._synced = held;
    } catch (error) {
      this._error = asModelError(error);
      throw error;
    } finally {
      this._generation++;
      this._changed.emit();
    }
  }

  /** After a submit or cancel: the push brings the change, else read now. */
  private _refreshUnlessPushed(): void {
    if (!(this.pushHeld && this._synced)) {
      void this.refresh();
    }
  }

  /** A pushed balance replaces its namespace's (a namespace not read yet waits for the read). */
  private _onBalance(balance: IBalance): void {
    const i = this._namespaces.findIndex(n => n.name === balance.namespace);
    if (i < 0) {
      return;
    }
    this._namespaces = this._namespaces.map((ns, j) =>
      j === i ? { ...ns, balance } : ns
    );
    this._pushed();
  }

  /** A pushed job replaces its entry in its namespace's list, or comes first when new. */
  private _onJob(job: IJob): void {
    const list = this._jobs.get(job.namespace);
    if (!list) {
      return;
    }
    const i = list.jobs.findIndex(j => j.name === job.name);
    const jobs =
      i < 0
        ? [job, ...list.jobs]
        : list.jobs.map((j, k) => (k === i ? job : j));
    this._jobs = new Map(this._jobs).set(job.namespace, { ...list, jobs });
    this._pushed();
  }

  /** Gained: read everything once (what changed while polling), then only listen. Lost: poll. */
  private _onHeld(held: boolean): void {
    this._synced = false;
    if (held) {
      void this._poll.refresh();
    }
    this._changed.emit();
  }

  private _pushed(): void {
    this._error = null;
    this._fetchedAt = Date.now();
    this._generation++;
    this._changed.emit();
  }

  private _client: IQuotaClient;
  private _push: IPushSubscription | null;
  /** A read completed while the push was held: later polls are skipped. */
  private _synced = false;
  private _forced = false;
  private _poll: Poll;
  private _interval: number;
  private _statusNamespace = '';
  private _namespaces: INamespaceSummary[] = [];
  private _jobs = new Map<string, IJobList>();
  /** Jobs to read per namespace after "Show more"; absent: the server's page size. */
  private _shown = new Map<string, number>();
  private _identity: IIdentity | null = null;
  private _error: IModelError | null = null;
  private _fetchedAt: number | null = null;
  private _generation = 0;
  private _changed = new Signal<this, void>(this);
}

/**
 * Any thrown value as `{status, reason, message}`.
 */
export function asModelError(error: unknown): IModelError {
  const e = error as Partial<IModelError> | null;
  if (e && typeof e === 'object' && typeof e.message === 'string') {
    return {
      status: typeof e.status === 'number' ? e.status : 0,
      reason: typeof e.reason === 'string' ? e.reason : 'Error',
      message: e.message
    };
  }
  return { status: 0, reason: 'Error', message: String(error) };
}

/**
 * Milliseconds between two polls unless the settings say otherwise (their
 * `refreshInterval` defaults to the same 10 s). Each poll reads `GET namespaces`
 * again, hard limits included, so an admin's profile edit shows within one interval.
 */
export const DEFAULT_INTERVAL = 10 * 1000;
const MAX_BACKOFF = 5 * 60 * 1000;

/**
 * The poll's schedule: every `interval` ms, backing off after errors up to
 * 5 minutes, or up to `interval` when that is longer (Poll refuses an
 * interval over its max).
 */
function frequencyOf(interval: number): IPoll.Frequency {
  return { interval, backoff: true, max: Math.max(interval, MAX_BACKOFF) };
}
