import { ServerConnection } from '@jupyterlab/services';

import { ConditionalGet } from '../conditional';
import {
  BALANCE_EVENT,
  IEventSourceLike,
  IPushHandlers,
  INCREASE_EVENT,
  JOB_EVENT,
  PushSubscription
} from '../events';
import { IQuotaClient, QuotaModel } from '../model';
import { IBalance, IJob, INamespaceSummary } from '../tokens';

/** A browser's EventSource as far as `PushSubscription` uses it; the test plays the server. */
class FakeSource implements IEventSourceLike {
  static opened: FakeSource[] = [];
  readyState = 0;
  closed = false;
  listeners = new Map<string, ((event: { data?: unknown }) => void)[]>();

  constructor(readonly url: string) {
    FakeSource.opened.push(this);
  }
  addEventListener(
    type: string,
    listener: (event: { data?: unknown }) => void
  ) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
  /** The server sends an event (`data` as JSON text, as on the wire). */
  emit(type: string, data?: unknown) {
    this.readyState = type === 'error' ? this.readyState : 1;
    const event = data === undefined ? {} : { data: JSON.stringify(data) };
    for (const listener of this.listeners.get(type) ?? []) {
      listener(event);
    }
  }
  /** The connection fails; `gaveUp`: the browser will not reconnect (a 403, a wrong content type). */
  fail(gaveUp = false) {
    this.readyState = gaveUp ? 2 : 0;
    this.emit('error');
  }
}

function balance(namespace: string, used: string): IBalance {
  return {
    namespace,
    team: namespace.replace('team-', ''),
    resources: {
      'requests.nvidia.com/gpu': {
        hard: '2',
        used,
        remaining: String(2 - Number(used))
      }
    },
    observedAt: '2026-01-01T00:00:00Z',
    stale: false
  } as IBalance;
}

function job(name: string, phase = 'Running'): IJob {
  return {
    name,
    namespace: 'team-alpha',
    team: 'alpha',
    owner: 'ann',
    phase,
    args: [],
    gpus: 1,
    createdAt: '2026-01-01T00:00:00Z'
  } as unknown as IJob;
}

function recorder(): IPushHandlers & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    balance: b => log.push(`balance ${b.namespace}`),
    job: j => log.push(`job ${j.name}`),
    increase: i => log.push(`increase ${i.name}`),
    held: h => log.push(`held ${h}`)
  };
}

beforeEach(() => {
  FakeSource.opened = [];
});

describe('PushSubscription', () => {
  it('is held once the first event arrives, and delivers each event once', () => {
    const handlers = recorder();
    const push = new PushSubscription({
      url: '/quota/v1/events',
      create: url => new FakeSource(url),
      handlers
    });
    const source = FakeSource.opened[0];
    expect(source.url).toBe('/quota/v1/events');
    expect(push.held).toBe(false);
    source.emit('open');
    expect(push.held).toBe(false); // a buffering proxy opens the stream and sends nothing
    source.emit(BALANCE_EVENT, balance('team-alpha', '0'));
    source.emit(JOB_EVENT, job('j1'));
    source.emit(JOB_EVENT, 'not an object');
    source.emit(INCREASE_EVENT, { name: 'inc-1', phase: 'Pending' });
    expect(push.held).toBe(true);
    expect(handlers.log).toEqual([
      'held true',
      'balance team-alpha',
      'job j1',
      'increase inc-1'
    ]);
    push.dispose();
    expect(source.closed).toBe(true);
    expect(handlers.log[handlers.log.length - 1]).toBe('held false');
  });

  it('loses the hold on an error and opens again after the browser gave up', () => {
    jest.useFakeTimers();
    try {
      const handlers = recorder();
      const push = new PushSubscription({
        url: 'u',
        create: url => new FakeSource(url),
        handlers,
        reopenAfter: 1000
      });
      const first = FakeSource.opened[0];
      first.emit(BALANCE_EVENT, balance('team-alpha', '0'));
      first.fail(); // the browser reconnects by itself: no new source
      expect(push.held).toBe(false);
      jest.advanceTimersByTime(5000);
      expect(FakeSource.opened).toHaveLength(1);
      first.fail(true); // a 403 or a proxy's error page: the browser stops
      expect(first.closed).toBe(true);
      jest.advanceTimersByTime(999);
      expect(FakeSource.opened).toHaveLength(1);
      jest.advanceTimersByTime(1);
      expect(FakeSource.opened).toHaveLength(2);
      first.emit(BALANCE_EVENT, balance('team-alpha', '1')); // the old source is ignored
      expect(handlers.log).toEqual([
        'held true',
        'balance team-alpha',
        'held false'
      ]);
      FakeSource.opened[1].emit(BALANCE_EVENT, balance('team-alpha', '1'));
      expect(push.held).toBe(true);
      push.dispose();
    } finally {
      jest.useRealTimers();
    }
  });

  it('leaves the model polling where there is no EventSource', () => {
    jest.useFakeTimers();
    try {
      const handlers = recorder();
      const push = new PushSubscription({
        url: 'u',
        create: () => {
          throw new ReferenceError('EventSource is not defined');
        },
        handlers
      });
      expect(push.held).toBe(false);
      push.dispose();
      jest.runOnlyPendingTimers();
      expect(handlers.log).toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });
});

function summary(name: string): INamespaceSummary {
  return {
    name,
    team: name.replace('team-', ''),
    gpuResource: 'nvidia.com/gpu',
    balance: balance(name, '0')
  } as INamespaceSummary;
}

class CountingClient implements IQuotaClient {
  createEndpoint = jest.fn();
  endpoint = jest.fn();
  deleteEndpoint = jest.fn();
  calls: string[] = [];
  async namespaces() {
    this.calls.push('namespaces');
    return { namespaces: [summary('team-alpha')] };
  }
  async jobs(ns: string) {
    this.calls.push(`jobs ${ns}`);
    return { jobs: [job('old', 'Succeeded')], metadata: {} };
  }
  async identity() {
    return {
      name: 'ann',
      groups: [],
      admin: false,
      namespaces: ['team-alpha']
    } as any;
  }
  async submit(): Promise<IJob> {
    this.calls.push('submit');
    return job('new', 'Pending');
  }
  async cancel(): Promise<IJob> {
    return job('old');
  }
  async logs(): Promise<any> {
    return {};
  }
  async replan(): Promise<any> {
    return {};
  }
}

/** Wait for `count` of the model's poll ticks (each resolves when a poll ran or was skipped). */
async function ticks(model: QuotaModel, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await (model as any)._poll.tick;
  }
}

describe('QuotaModel with a push', () => {
  function pushedModel() {
    const client = new CountingClient();
    let handlers: IPushHandlers | null = null;
    const model = new QuotaModel({
      client,
      refreshInterval: 5,
      standby: 'never',
      push: h => {
        handlers = h;
        return new PushSubscription({
          url: 'u',
          create: url => new FakeSource(url),
          handlers: h
        });
      }
    });
    return {
      client,
      model,
      handlers: () => handlers!,
      source: () => FakeSource.opened[0]
    };
  }

  it('reads once when the push is held, then polls no more and applies what is pushed', async () => {
    const { client, model, source } = pushedModel();
    await ticks(model, 2);
    expect(client.calls.filter(c => c === 'namespaces').length).toBeGreaterThan(
      0
    );
    source().emit(BALANCE_EVENT, balance('team-alpha', '0'));
    expect(model.pushHeld).toBe(true);
    expect(model.live).toBe(false); // held, not yet read since
    await ticks(model, 1); // the read that follows the hold
    await ticks(model, 1);
    expect(model.live).toBe(true);
    const before = client.calls.length;
    await ticks(model, 5);
    expect(client.calls.length).toBe(before); // five ticks, no request

    source().emit(BALANCE_EVENT, balance('team-alpha', '2'));
    expect(model.gpuSummary()).toEqual({
      namespace: 'team-alpha',
      remaining: 0,
      hard: 2
    });
    await model.submit('team-alpha', { args: [] });
    source().emit(JOB_EVENT, job('new', 'Pending'));
    expect(model.jobs('team-alpha').map(j => `${j.name} ${j.phase}`)).toEqual([
      'new Pending',
      'old Succeeded'
    ]);
    source().emit(JOB_EVENT, job('new', 'Running'));
    expect(model.jobs('team-alpha').map(j => j.phase)).toEqual([
      'Running',
      'Succeeded'
    ]);
    expect(client.calls.slice(before)).toEqual(['submit']); // the push, not a read, brought it
    model.dispose();
  });

  it('an increase event makes the views that list requests read them again', async () => {
    const { model, source } = pushedModel();
    source().emit(BALANCE_EVENT, balance('team-alpha', '0'));
    const generation = model.generation;
    let changes = 0;
    model.changed.connect(() => changes++);
    source().emit(INCREASE_EVENT, { name: 'inc-1', phase: 'Pending' });
    expect(model.generation).toBe(generation + 1); // useIncreases reloads on it
    expect(changes).toBe(1);
    model.dispose();
  });

  it('falls back to polling when the push is lost', async () => {
    const { client, model, source } = pushedModel();
    source().emit(BALANCE_EVENT, balance('team-alpha', '0'));
    await ticks(model, 3);
    const held = client.calls.length;
    await ticks(model, 3);
    expect(client.calls.length).toBe(held);
    source().fail();
    expect(model.pushHeld).toBe(false);
    expect(model.live).toBe(false);
    await ticks(model, 3);
    expect(
      client.calls.slice(held).filter(c => c === 'namespaces').length
    ).toBeGreaterThanOrEqual(2);
    model.dispose();
  });
});

describe('ConditionalGet', () => {
  it('sends the last ETag back and serves a 304 from the last body', async () => {
    const sent: (string | null)[] = [];
    const answers = [
      new Response('{"namespaces": [1]}', {
        status: 200,
        headers: { ETag: 'W/"a"' }
      }),
      new Response(null, { status: 304 }),
      new Response('{"namespaces": [2]}', {
        status: 200,
        headers: { ETag: 'W/"b"' }
      })
    ];
    const settings = ServerConnection.makeSettings({
      baseUrl: 'http://localhost/',
      appendToken: false,
      fetch: async (request: RequestInfo) => {
        sent.push(
          new Headers((request as Request).headers).get('If-None-Match')
        );
        return answers.shift()!;
      }
    } as any);
    const reads = new ConditionalGet(settings);
    expect(await reads.get('namespaces')).toEqual({ namespaces: [1] });
    expect(await reads.get('namespaces')).toEqual({ namespaces: [1] });
    expect(await reads.get('namespaces')).toEqual({ namespaces: [2] });
    expect(sent).toEqual([null, 'W/"a"', 'W/"a"']);
  });
});
