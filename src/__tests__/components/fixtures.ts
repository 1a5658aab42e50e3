/**
 * What the component tests render from: API answers shaped by the OpenAPI
 * types, a fake server for the real `QuotaModel`, and a promise a test
 * settles by hand (to see a view while its request is in flight).
 */

import { IQuotaClient, QuotaModel } from '../../model';
import {
  IEndpoint,
  IIdentity,
  IIncrease,
  IJob,
  IJobPage,
  INamespaceSummary,
  IVerification
} from '../../tokens';

export const NOW = Date.parse('2026-12-01T12:00:00Z');

export function summary(
  name: string,
  gpu = { hard: '2', used: '1', remaining: '1' }
): INamespaceSummary {
  const team = name.replace('team-', '');
  return {
    name,
    team,
    gpuResource: 'nvidia.com/gpu',
    balance: {
      namespace: name,
      team,
      resources: {
        'requests.nvidia.com/gpu': gpu,
        'requests.cpu': { hard: '8', used: '2', remaining: '6' },
        'limits.memory': { hard: '128Gi', used: '32Gi', remaining: '96Gi' }
      },
      observedAt: '2026-12-01T11:59:50Z',
      stale: false
    }
  };
}

export function job(fields: Partial<IJob> = {}): IJob {
  return {
    name: 'sft-1',
    namespace: 'team-alpha',
    owner: 'ann',
    phase: 'Running',
    args: ['--model', 'Qwen/Qwen2.5-0.5B-Instruct'],
    gpus: 1,
    resources: {},
    createdAt: '2026-12-01T11:00:00Z',
    ...fields
  };
}

/** An endpoint as `GET .../endpoints/{name}` returns it (Ready, serving `tiny`). */
export function endpoint(fields: Partial<IEndpoint> = {}): IEndpoint {
  return {
    name: 'serve-x7k2p',
    namespace: 'team-alpha',
    team: 'alpha',
    owner: 'ann',
    phase: 'Ready',
    url: '/quota/v1/namespaces/team-alpha/endpoints/serve-x7k2p/v1/',
    models: ['tiny'],
    args: ['--model', '/m/tiny', '--adapters', '/out/checkpoint-3'],
    gpus: 0,
    priority: 'normal',
    resources: {
      requests: { cpu: '2', memory: '4Gi' },
      limits: { memory: '8Gi' }
    },
    createdAt: '2026-12-01T11:00:00Z',
    ...fields
  };
}

/** A job's estimate (`memory`) of 3.1 GiB per GPU, nothing measured yet. */
export const MEMORY: IJob['memory'] = {
  estimatedGib: 3.1,
  rangeGib: [2.8, 3.5],
  measuredGib: null,
  outOfMemory: false
} as IJob['memory'];

export function increase(fields: Partial<IIncrease> = {}): IIncrease {
  return {
    name: 'inc-1',
    namespace: 'team-alpha',
    team: 'alpha',
    user: 'ann',
    phase: 'Pending',
    resources: { 'requests.nvidia.com/gpu': '2' },
    hours: 8,
    reason: 'a paper deadline',
    createdAt: '2026-12-01T10:00:00Z',
    decidedAt: null,
    decidedBy: null,
    comment: null,
    expiresAt: null,
    ...fields
  };
}

export const ANN = {
  name: 'ann',
  groups: ['alpha'],
  admin: false,
  namespaces: ['team-alpha'],
  backend: 'local'
} as IIdentity;

/** An API error as `request.ts` throws it. */
export function apiError(status: number, reason: string, message: string) {
  return Object.assign(new Error(message), { status, reason });
}

/** A promise the test resolves or rejects when it wants. */
export function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** The server the real `QuotaModel` polls: namespaces, jobs and identity as set. */
export class FakeServer implements IQuotaClient {
  namespacesList: INamespaceSummary[] = [summary('team-alpha')];
  jobList: IJob[] = [];
  /** Older jobs, served as the second page (after `continue`). */
  olderList: IJob[] = [];
  identityOf: IIdentity = ANN;
  cancel = jest.fn(async (namespace: string, name: string) =>
    job({ namespace, name, phase: 'Failed', reason: 'Cancelled' })
  );
  submit = jest.fn(async (namespace: string) =>
    job({ namespace, name: 'sft-2', phase: 'Pending' })
  );
  replan = jest.fn();
  logs = jest.fn(async () => ({ logs: 'step 1' }) as never);
  createEndpoint = jest.fn(async (namespace: string) =>
    endpoint({ namespace, phase: 'Pending', models: [] })
  );
  endpoint = jest.fn(async (namespace: string, name: string) =>
    endpoint({ namespace, name })
  );
  deleteEndpoint = jest.fn(async (namespace: string, name: string) =>
    endpoint({ namespace, name, phase: 'Stopped', reason: 'Cancelled' })
  );

  async namespaces() {
    return { namespaces: this.namespacesList };
  }
  jobs = jest.fn(async (namespace: string, page: IJobPage = {}) => {
    const older = this.olderList.filter(j => j.namespace === namespace);
    if (page.continue) {
      return { jobs: older, metadata: {} };
    }
    return {
      jobs: this.jobList.filter(j => j.namespace === namespace),
      metadata: older.length
        ? { remainingItemCount: older.length, continue: 'page-2' }
        : {}
    };
  });
  async identity() {
    return this.identityOf;
  }
}

/** A model that has read `server` once (no polling: tests refresh it by hand). */
export async function loadedModel(server: FakeServer): Promise<QuotaModel> {
  const model = new QuotaModel({ client: server, auto: false });
  await model.refresh();
  return model;
}

/** A verification in `state`, done with a 13.5 GiB simulated peak. */
export function verification(
  state: IVerification['state'],
  args: string[] = ['--model', 'Qwen/Qwen2.5-0.5B-Instruct'],
  gpus = 1
): IVerification {
  const GIB = 2 ** 30;
  return {
    id: 'v1',
    state,
    args,
    gpus,
    startedAt: '2026-12-03T07:00:00Z',
    finishedAt: state === 'running' ? null : '2026-12-03T07:00:20Z',
    reason:
      state === 'unsupported'
        ? 'cannot simulate: --deepspeed zero2'
        : state === 'failed'
          ? 'the simulated step ran past 600 s'
          : null,
    result:
      state === 'done'
        ? {
            regime: 'lora/r8/ckpt/sdpa/b1/t1024',
            liveBytes: 12 * GIB,
            allocatedBytes: 12.2 * GIB,
            reservedBytes: 13 * GIB,
            optimizerStep: 'fused',
            foreachBytes: 0,
            workspaceBytes: 0.5 * GIB,
            workspaceRangeBytes: [-GIB, 11 * GIB],
            workspaceBasis: '11 measured rows of 2 sources; lora rows',
            peakBytesPerGpu: 13.5 * GIB,
            peakGibPerGpu: 13.5,
            breakdown: { parameters: GIB },
            peakPhase: 'backward',
            extrapolatedFrom: [2, 3],
            seconds: 20,
            versions: { torch: '2.13.0' }
          }
        : null
  };
}

/** A verification client whose run is `running` when started and `done` when read again. */
export class FakeVerifier {
  startVerification = jest.fn(
    async (args: string[], gpus: number): Promise<IVerification> =>
      verification('running', args, gpus)
  );
  verification = jest.fn(
    async (id: string): Promise<IVerification> => (
      void id,
      verification('done')
    )
  );
}
