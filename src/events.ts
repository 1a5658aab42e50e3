/**
 * Push, not poll: `GET {base_url}quota/v1/events` (server-sent events) held
 * open with an `EventSource`. Each `balance` event carries what
 * `GET .../balance` answers, each `job` event a job as `GET .../jobs/{name}`
 * answers it, each `increase` event a temporary increase request as
 * `GET /increases` lists it (requested, decided or ended).
 *
 * The push counts as held once the stream has delivered its first event (the
 * server starts with each namespace's balance): a proxy that buffers the
 * stream, a server without the route or a refused subscription never gets
 * there, and the model keeps polling. An error drops the hold; the browser
 * reconnects by itself (the `retry:` the server sends), and a stream the
 * browser gave up on (`readyState` CLOSED, e.g. after a 403) is opened again
 * after `reopenAfter` ms.
 *
 * It imports nothing from JupyterLab at run time, so it is unit-tested in
 * plain Node with a fake `EventSource`.
 */

import { IBalance, IIncrease, IJob } from './tokens';

/** The event names the server sends (`jupyter_quota/service/events.py`). */
export const BALANCE_EVENT = 'balance';
export const JOB_EVENT = 'job';
export const INCREASE_EVENT = 'increase';
/**
 * An endpoint's phase, readiness, models or reason changed: its JSON as
 * `GET .../endpoints/{name}` answers it, without `url` (nothing here listens
 * to it yet).
 */
export const ENDPOINT_EVENT = 'endpoint';

/** `EventSource.CLOSED`: the browser will not reconnect by itself. */
const CLOSED = 2;

/** What is used of a browser's `EventSource` (a fake in tests). */
export interface IEventSourceLike {
  readonly readyState: number;
  addEventListener(
    type: string,
    listener: (event: { data?: unknown }) => void
  ): void;
  close(): void;
}

/** What a push subscription tells whoever holds it. */
export interface IPushHandlers {
  balance(balance: IBalance): void;
  job(job: IJob): void;
  increase(increase: IIncrease): void;
  /** Called when the push is held (true) or lost (false). */
  held(held: boolean): void;
}

/** A push subscription: whether it is held now, and how to end it. */
export interface IPushSubscription {
  readonly held: boolean;
  dispose(): void;
}

/** Open a source for a URL (`url => new EventSource(url)` in a browser). */
export type EventSourceFactory = (url: string) => IEventSourceLike;

export namespace PushSubscription {
  export interface IOptions {
    url: string;
    create: EventSourceFactory;
    handlers: IPushHandlers;
    /** Milliseconds before a source the browser closed is opened again (default 30 s). */
    reopenAfter?: number;
  }
}

/**
 * One `EventSource` on `url`, reopened when the browser gives up on it.
 */
export class PushSubscription implements IPushSubscription {
  constructor(options: PushSubscription.IOptions) {
    this._options = options;
    this._open();
  }

  get held(): boolean {
    return this._held;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    clearTimeout(this._reopen);
    this._source?.close();
    this._source = null;
    this._setHeld(false);
  }

  private _open(): void {
    const { url, create, handlers } = this._options;
    let source: IEventSourceLike;
    try {
      source = create(url);
    } catch {
      this._scheduleReopen(); // no EventSource here: the model polls
      return;
    }
    this._source = source;
    const on = (name: string, deliver: (data: any) => void) =>
      source.addEventListener(name, event => {
        if (this._source !== source) {
          return;
        }
        const data = parseData(event.data);
        if (data === undefined) {
          return;
        }
        this._setHeld(true);
        deliver(data);
      });
    on(BALANCE_EVENT, data => handlers.balance(data as IBalance));
    on(JOB_EVENT, data => handlers.job(data as IJob));
    on(INCREASE_EVENT, data => handlers.increase(data as IIncrease));
    source.addEventListener('error', () => {
      if (this._source !== source) {
        return;
      }
      this._setHeld(false);
      if (source.readyState === CLOSED) {
        source.close();
        this._source = null;
        this._scheduleReopen();
      }
    });
  }

  private _scheduleReopen(): void {
    if (this._disposed) {
      return;
    }
    this._reopen = setTimeout(
      () => this._disposed || this._open(),
      this._options.reopenAfter ?? REOPEN_AFTER
    );
  }

  private _setHeld(held: boolean): void {
    if (held !== this._held) {
      this._held = held;
      this._options.handlers.held(held);
    }
  }

  private _options: PushSubscription.IOptions;
  private _source: IEventSourceLike | null = null;
  private _held = false;
  private _disposed = false;
  private _reopen: ReturnType<typeof setTimeout> | undefined = undefined;
}

const REOPEN_AFTER = 30 * 1000;

/** An event's `data` as JSON, or undefined when it is not an object. */
function parseData(data: unknown): object | undefined {
  if (typeof data !== 'string') {
    return undefined;
  }
  try {
    const parsed = JSON.parse(data);
    return parsed !== null && typeof parsed === 'object' ? parsed : undefined;
  } catch {
    return undefined;
  }
}
