import { IQuotaClient, QuotaModel } from '../model';
import {
  IJob,
  IJobPage,
  INamespaceSummary,
  IPlan,
  IPlanResult
} from '../tokens';

function summary(
  name: string,
  gpu = { hard: '2', used: '1', remaining: '1' }
): INamespaceSummary {
  return {
    name,
    team: name.replace('team-', ''),
    gpuResource: 'nvidia.com/gpu',
    balance: {
      namespace: name,
      team: name.replace('team-', ''),
      resources: {
        'requests.nvidia.com/gpu': gpu,
        'requests.cpu': { hard: '8', used: '2', remaining: '6' }
      },
      observedAt: '2026-01-01T00:00:00Z',
      stale: false
    }
  };
}

class FakeClient implements IQuotaClient {
  createEndpoint = jest.fn();
  endpoint = jest.fn();
  deleteEndpoint = jest.fn();
  namespacesList = [
    summary('team-alpha'),
    summary('team-beta', { hard: '4', used: '0', remaining: '4' })
  ];
  jobList: { [ns: string]: IJob[] } = {};
  /** The server's page size when a request names no limit (`JupyterQuota.job_list_limit`). */
  pageSize = 100;
  failWith: unknown = null;
  calls: string[] = [];

  async namespaces() {
    this.calls.push('namespaces');
    if (this.failWith) {
      throw this.failWith;
    }
    return { namespaces: this.namespacesList };
  }
  /** Pages as the server makes them: newest first, `continue` resumes after the last one shown. */
  async jobs(ns: string, page: IJobPage = {}) {
    const query = [
      page.limit && `limit=${page.limit}`,
      page.continue && `continue=${page.continue}`
    ];
    this.calls.push(
      `jobs ${ns}` +
        query
          .filter(Boolean)
          .map((q, i) => (i ? '&' : '?') + q)
          .join('')
    );
    const all = this.jobList[ns] ?? [];
    const start = page.continue
      ? all.findIndex(j => j.name === page.continue) + 1
      : 0;
    const jobs = all.slice(start, start + (page.limit ?? this.pageSize));
    const remaining = all.length - start - jobs.length;
    if (!remaining) {
      return { jobs, metadata: {} };
    }
    return {
      jobs,
      metadata: {
        continue: jobs[jobs.length - 1].name,
        remainingItemCount: remaining
      }
    };
  }
  async identity() {
    this.calls.push('identity');
    return {
      name: 'ana',
      groups: [],
      admin: false,
      namespaces: ['team-alpha'],
      backend: 'local' as const
    };
  }
  async submit(ns: string) {
    this.calls.push(`submit ${ns}`);
    return { name: 'sft-1', namespace: ns } as IJob;
  }
  async cancel(ns: string, name: string) {
    this.calls.push(`cancel ${ns}/${name}`);
    return { name, namespace: ns } as IJob;
  }
  async logs(namespace: string, name: string, tailLines: number) {
    return { name, namespace, tailLines, logs: 'ready\n' };
  }
  /** The next plan down: `recommended`, or none when `noSmallerPlan`. */
  noSmallerPlan = false;
  async replan(ns: string, name: string) {
    this.calls.push(`replan ${ns}/${name}`);
    const recommended = this.noSmallerPlan
      ? null
      : ({
          args: ['--model', 'm', '--tuner_type', 'lora'],
          gpus: 1,
          resources: { requests: { cpu: '4' }, limits: {} }
        } as unknown as IPlan);
    return { recommended } as IPlanResult;
  }
}

describe('QuotaModel', () => {
  let client: FakeClient;
  let model: QuotaModel;

  beforeEach(() => {
    client = new FakeClient();
    model = new QuotaModel({ client, auto: false, refreshInterval: 60_000 });
  });

  afterEach(() => model.dispose());

  it('starts empty and loads namespaces, jobs and identity on refresh', async () => {
    expect(model.loaded).toBe(false);
    expect(model.gpuSummary()).toBeNull();
    client.jobList['team-alpha'] = [{ name: 'j', phase: 'Running' } as IJob];
    let changes = 0;
    model.changed.connect(() => changes++);

    await model.refresh();

    expect(model.loaded).toBe(true);
    expect(model.error).toBeNull();
    expect(model.identity?.name).toBe('ana');
    expect(model.namespaces.map(n => n.name)).toEqual([
      'team-alpha',
      'team-beta'
    ]);
    expect(model.jobs('team-alpha').map(j => j.name)).toEqual(['j']);
    expect(model.jobs('team-beta')).toEqual([]);
    expect(changes).toBe(1);
    expect(model.generation).toBe(1);
  });

  it('reads the identity once', async () => {
    await model.refresh();
    await model.refresh();
    expect(client.calls.filter(c => c === 'identity')).toHaveLength(1);
    expect(client.calls.filter(c => c === 'namespaces')).toHaveLength(2);
  });

  it('summarises the GPUs of the chosen namespace, or the first', async () => {
    await model.refresh();
    expect(model.gpuSummary()).toEqual({
      namespace: 'team-alpha',
      remaining: 1,
      hard: 2
    });
    model.statusNamespace = 'team-beta';
    expect(model.gpuSummary()).toEqual({
      namespace: 'team-beta',
      remaining: 4,
      hard: 4
    });
    model.statusNamespace = 'team-gone';
    expect(model.gpuSummary()?.namespace).toBe('team-alpha');
  });

  it("reads the GPUs of the namespace's own GPU resource, not a guessed one", async () => {
    const amd = summary('team-amd');
    amd.gpuResource = 'amd.com/gpu';
    amd.balance.resources = {
      'requests.nvidia.com/gpu': { hard: '8', used: '0', remaining: '8' },
      'requests.amd.com/gpu': { hard: '2', used: '2', remaining: '0' }
    };
    client.namespacesList = [amd];
    await model.refresh();
    expect(model.gpuSummary()).toEqual({
      namespace: 'team-amd',
      remaining: 0,
      hard: 2
    });
    amd.gpuResource = 'intel.com/gpu';
    await model.refresh();
    expect(model.gpuSummary()).toBeNull();
  });

  it('keeps the last data and records the error when a poll fails', async () => {
    await model.refresh();
    client.failWith = Object.assign(new Error('server down'), {
      status: 0,
      reason: 'NetworkError'
    });
    await model.refresh();
    expect(model.error).toEqual({
      status: 0,
      reason: 'NetworkError',
      message: 'server down'
    });
    expect(model.loaded).toBe(true);
    expect(model.namespaces).toHaveLength(2);
    client.failWith = null;
    await model.refresh();
    expect(model.error).toBeNull();
  });

  it('says when the server extension is missing', async () => {
    client.failWith = Object.assign(new Error('not installed'), {
      status: 404,
      reason: 'ServerExtensionMissing'
    });
    await model.refresh();
    expect(model.extensionMissing).toBe(true);
    expect(model.loaded).toBe(false);
  });

  it('refreshes after a submit and a cancel', async () => {
    await model.submit('team-alpha', { args: ['--model', 'm'], gpus: 1 });
    await new Promise(resolve => setTimeout(resolve, 50));
    expect(client.calls).toContain('submit team-alpha');
    expect(client.calls).toContain('namespaces');
    await model.cancel('team-alpha', 'sft-1');
    expect(client.calls).toContain('cancel team-alpha/sft-1');
  });

  it('polls on its own at the interval it is given', async () => {
    const polled = new QuotaModel({
      client,
      refreshInterval: 20,
      standby: 'never'
    });
    try {
      // Wait on the polls themselves, not a fixed sleep that a loaded machine outruns.
      const polls = () => client.calls.filter(c => c === 'namespaces').length;
      await new Promise<void>(resolve => {
        polled.changed.connect(() => polls() >= 3 && resolve());
      });
      expect(polls()).toBeGreaterThanOrEqual(3);
      polled.refreshInterval = 60_000;
      expect(polled.refreshInterval).toBe(60_000);
    } finally {
      polled.dispose();
    }
    expect(polled.isDisposed).toBe(true);
  });

  it('takes a refresh interval longer than the longest back-off', () => {
    const slow = new QuotaModel({
      client,
      auto: false,
      refreshInterval: 10 * 60 * 1000
    });
    try {
      expect(slow.refreshInterval).toBe(600_000);
      slow.refreshInterval = 60 * 60 * 1000; // the settings' refreshInterval has no maximum
      expect(slow.refreshInterval).toBe(3_600_000);
    } finally {
      slow.dispose();
    }
  });

  it('reads the hard limits again at each poll: a new one shows at the next', async () => {
    const polled = new QuotaModel({
      client,
      refreshInterval: 20,
      standby: 'never'
    });
    const hardOf = () =>
      polled.namespaces.find(n => n.name === 'team-beta')?.balance.resources[
        'requests.nvidia.com/gpu'
      ].hard;
    const next = (hard: string) =>
      new Promise<void>(resolve => {
        const check = () => {
          if (hardOf() === hard) {
            polled.changed.disconnect(check);
            resolve();
          }
        };
        polled.changed.connect(check);
        check();
      });
    try {
      await next('4');
      client.namespacesList = [
        summary('team-alpha'),
        summary('team-beta', { hard: '6', used: '0', remaining: '6' })
      ];
      await next('6'); // no refresh() call: the poll alone brings it
      expect(polled.gpuSummary()).toEqual({
        namespace: 'team-alpha',
        remaining: 1,
        hard: 2
      });
    } finally {
      polled.dispose();
    }
  });

  describe('the job list in pages', () => {
    const named = (n: number) =>
      Array.from(
        { length: n },
        (_, i) => ({ name: `job-${n - i}`, phase: 'Succeeded' }) as IJob
      );

    beforeEach(() => {
      client.pageSize = 2;
      client.jobList['team-alpha'] = named(5);
    });

    it('says how many older jobs the first page leaves out', async () => {
      await model.refresh();

      expect(model.jobs('team-alpha').map(j => j.name)).toEqual([
        'job-5',
        'job-4'
      ]);
      expect(model.olderJobs('team-alpha')).toBe(3);
      expect(model.olderJobs('team-beta')).toBe(0);
    });

    it('shows more by following continue, and keeps showing them on later polls', async () => {
      await model.refresh();
      let changes = 0;
      model.changed.connect(() => changes++);

      await model.showMoreJobs('team-alpha');

      expect(client.calls).toContain('jobs team-alpha?continue=job-4');
      expect(model.jobs('team-alpha').map(j => j.name)).toEqual([
        'job-5',
        'job-4',
        'job-3',
        'job-2'
      ]);
      expect(model.olderJobs('team-alpha')).toBe(1);
      expect(changes).toBe(1);

      client.calls = [];
      client.jobList['team-alpha'] = named(6); // a new job: the list still shows 4, newest first
      await model.refresh();
      expect(client.calls).toContain('jobs team-alpha?limit=4');
      expect(client.calls).toContain('jobs team-beta');
      expect(model.jobs('team-alpha').map(j => j.name)).toEqual([
        'job-6',
        'job-5',
        'job-4',
        'job-3'
      ]);
      expect(model.olderJobs('team-alpha')).toBe(2);

      await model.showMoreJobs('team-alpha');
      expect(model.jobs('team-alpha').map(j => j.name)).toEqual(
        named(6).map(j => j.name)
      );
      expect(model.olderJobs('team-alpha')).toBe(0);
      await model.showMoreJobs('team-alpha'); // nothing left: no call
      expect(client.calls.filter(c => c.includes('continue'))).toHaveLength(1);
    });
  });

  describe('retry', () => {
    it('re-plans the job and submits the next plan down', async () => {
      await expect(model.retry('team-alpha', 'oom-1')).resolves.toMatchObject({
        name: 'sft-1'
      });
      expect(client.calls).toEqual(
        expect.arrayContaining(['replan team-alpha/oom-1', 'submit team-alpha'])
      );
    });

    it('says so when no smaller plan fits, and submits nothing', async () => {
      client.noSmallerPlan = true;
      await expect(model.retry('team-alpha', 'oom-1')).rejects.toMatchObject({
        status: 409,
        reason: 'NoSmallerPlan'
      });
      expect(client.calls).not.toContain('submit team-alpha');
    });
  });
});
