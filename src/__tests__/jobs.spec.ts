import {
  canCancel,
  canRetry,
  changeText,
  elasticLines,
  explainJob,
  jobsShownLine,
  magicLine,
  stalledLine,
  memoryLine,
  phaseLabel,
  splitArgs,
  swiftArgs
} from '../jobs';
import { IIdentity, IJob, IPlanChange } from '../tokens';
import { MEMORY as memory } from './components/fixtures';

function job(overrides: Partial<IJob>): IJob {
  return {
    name: 'sft-1',
    namespace: 'team-alpha',
    owner: 'ana',
    phase: 'Running',
    args: [],
    gpus: 1,
    resources: { requests: {}, limits: {} },
    createdAt: '2026-01-01T00:00:00Z',
    ...overrides
  };
}

const ana: IIdentity = {
  name: 'ana',
  groups: [],
  admin: false,
  namespaces: [],
  backend: 'local'
};

describe('explainJob', () => {
  it('says nothing about a running or finished job', () => {
    expect(explainJob(job({}))).toBe('');
    expect(explainJob(job({ phase: 'Succeeded' }))).toBe('');
  });

  it('says why a job waits or failed, with the message', () => {
    expect(
      explainJob(
        job({
          phase: 'Pending',
          reason: 'WaitingForResources',
          message: '0/1 nodes are available'
        })
      )
    ).toBe(
      'Waiting for GPUs, CPU or memory held by other jobs: 0/1 nodes are available'
    );
    expect(
      explainJob(
        job({
          phase: 'Failed',
          reason: 'FailedCreate',
          message: 'exceeded quota: q'
        })
      )
    ).toBe('Kubernetes could not create its pod: exceeded quota: q');
    expect(explainJob(job({ phase: 'Failed', exitCode: 3 }))).toBe(
      'The trainer exited with code 3'
    );
    expect(explainJob(job({ phase: 'Failed', reason: 'SomethingOdd' }))).toBe(
      'Something odd'
    );
    expect(explainJob(job({ phase: 'Pending' }))).toMatch(/Waiting to start/);
  });
});

describe('canCancel', () => {
  it('lets the owner and admins cancel live jobs only', () => {
    expect(canCancel(job({}), ana)).toBe(true);
    expect(canCancel(job({ owner: 'bo' }), ana)).toBe(false);
    expect(canCancel(job({ owner: 'bo' }), { ...ana, admin: true })).toBe(true);
    expect(canCancel(job({ phase: 'Succeeded' }), ana)).toBe(false);
    expect(canCancel(job({}), null)).toBe(false);
  });
});

describe('swiftArgs', () => {
  const base = {
    model: 'Qwen/Qwen2.5-7B-Instruct',
    maxLength: 2048,
    batchSize: 2,
    gpus: 1,
    dataset: '',
    extra: ''
  };

  it('speaks ms-swift 4.x', () => {
    expect(swiftArgs({ ...base, tuner: 'lora' })).toEqual([
      '--model',
      'Qwen/Qwen2.5-7B-Instruct',
      '--tuner_type',
      'lora',
      '--max_length',
      '2048',
      '--per_device_train_batch_size',
      '2'
    ]);
    expect(swiftArgs({ ...base, tuner: 'qlora4' })).toContain('--quant_bits');
    expect(
      swiftArgs({
        ...base,
        tuner: 'full',
        dataset: 'data.jsonl',
        extra: '--sleep 30'
      }).slice(2)
    ).toEqual([
      '--tuner_type',
      'full',
      '--max_length',
      '2048',
      '--per_device_train_batch_size',
      '2',
      '--dataset',
      'data.jsonl',
      '--sleep',
      '30'
    ]);
  });

  it('keeps quoted parts together', () => {
    expect(splitArgs(`--system "be brief" --x 'a b' c`)).toEqual([
      '--system',
      'be brief',
      '--x',
      'a b',
      'c'
    ]);
  });
});

describe('magicLine', () => {
  it('submits a plan as is, quoting what needs it', () => {
    expect(
      magicLine('team-alpha', {
        args: ['--model', 'Qwen/Qwen2.5-7B-Instruct', '--system', "it's"],
        gpus: 2
      })
    ).toBe(
      `%swift_sft --namespace team-alpha --gpus 2 --as-is --model Qwen/Qwen2.5-7B-Instruct --system 'it'\\''s'`
    );
    expect(
      magicLine('team-alpha', { args: ['--model', 'm'], gpus: 1 }, false)
    ).toBe('%swift_sft --namespace team-alpha --gpus 1 --model m');
  });
});

describe('plan changes in words', () => {
  it('says what changed, from what, to what, and why', () => {
    const change = (
      field: IPlanChange['field'],
      from: IPlanChange['from'],
      to: IPlanChange['to']
    ) => changeText({ field, from, to, why: 'because' });
    expect(change('gpus', 1, 2)).toBe('gpus: 1 → 2 (because)');
    expect(change('deepspeed', null, 'zero3')).toBe(
      'deepspeed: default → zero3 (because)'
    );
    expect(change('gradient_checkpointing', false, true)).toBe(
      'gradient_checkpointing: false → true (because)'
    );
    expect(change('batch', '8 x 1', '2 x 4')).toBe(
      'batch: 8 x 1 → 2 x 4 (because)'
    );
  });
});

describe('jobsShownLine', () => {
  it('says how many jobs exist when older ones are not shown', () => {
    expect(jobsShownLine(100, 1134)).toBe(
      'Showing the newest 100 of 1,234 jobs'
    );
    expect(jobsShownLine(1, 1)).toBe('Showing the newest 1 of 2 jobs');
  });

  it('says nothing when every job is shown', () => {
    expect(jobsShownLine(3, 0)).toBe('');
  });
});

describe('stalledLine', () => {
  it('flags a running job with what is wrong and since when', () => {
    const stalled = {
      since: '2026-11-30T10:05:00Z',
      reason: 'NoLogProgress' as const,
      message:
        'no log output for 31 minutes (the limit is 30): the job may hang'
    };
    expect(stalledLine(job({ stalled }))).toBe(
      'Stalled since 2026-11-30 10:05 UTC: no log output for 31 minutes (the limit is 30): the job may hang'
    );
  });

  it('says nothing of a job that is not stalled or no longer runs', () => {
    expect(stalledLine(job({ stalled: null }))).toBe('');
    expect(stalledLine(job({}))).toBe('');
    const stalled = {
      since: '2026-11-30T10:05:00Z',
      reason: 'LowGpuUtilization' as const,
      message: 'm'
    };
    expect(stalledLine(job({ phase: 'Failed', stalled }))).toBe('');
  });
});

describe('memoryLine and canRetry', () => {
  const memory = {
    estimatedGib: 14.2,
    rangeGib: [12.9, 16.1],
    measuredGib: 15,
    gpu: 'A100 80GB',
    outOfMemory: false
  };

  it('says the estimate, its range and the measured peak', () => {
    expect(memoryLine(job({}))).toBe('');
    expect(memoryLine(job({ memory }))).toBe(
      'estimated 14.2 GiB (12.9–16.1) per GPU, measured 15 GiB'
    );
    expect(
      memoryLine(
        job({
          memory: {
            ...memory,
            rangeGib: null,
            measuredGib: null,
            outOfMemory: true
          }
        })
      )
    ).toBe('estimated 14.2 GiB per GPU, out of memory');
  });

  it('offers the next plan down for an own job that ran out of memory', () => {
    const oom = job({ phase: 'Failed', reason: 'OutOfMemory' });
    expect(canRetry(oom, ana)).toBe(true);
    expect(canRetry({ ...oom, owner: 'bob' }, ana)).toBe(false);
    expect(canRetry({ ...oom, owner: 'bob' }, { ...ana, admin: true })).toBe(
      true
    );
    expect(canRetry(job({ phase: 'Failed', reason: 'Error' }), ana)).toBe(
      false
    );
    expect(canRetry(oom, null)).toBe(false);
    expect(explainJob(oom)).toBe('Ran out of GPU memory');
  });
});

describe('elasticLines', () => {
  it('says nothing of a normal job that never borrowed', () => {
    expect(elasticLines(job({ priority: 'normal' }))).toEqual([]);
  });

  it('tells every step: borrowed, preempted at step N, requeued, resumed', () => {
    const lines = elasticLines(
      job({
        priority: 'best-effort',
        borrowed: true,
        history: [
          { event: 'Borrowed', at: '2026-01-01T00:00:00Z' },
          {
            event: 'Preempted',
            at: '2026-01-01T00:00:09Z',
            step: 2,
            reason: 'Reclaimed'
          },
          {
            event: 'Requeued',
            at: '2026-01-01T00:00:10Z',
            checkpoint: '/out/checkpoint-2'
          },
          {
            event: 'Resumed',
            at: '2026-01-01T00:00:30Z',
            checkpoint: '/out/checkpoint-2'
          }
        ]
      })
    );
    expect(lines).toEqual([
      'best-effort priority',
      'running on borrowed GPUs',
      'started on borrowed GPUs',
      'preempted at step 2 (Reclaimed)',
      'requeued, to resume from /out/checkpoint-2',
      'resumed from /out/checkpoint-2'
    ]);
  });

  it('explains a job being preempted and one requeued', () => {
    expect(
      explainJob(
        job({ reason: 'Reclaimed', message: 'team-b reclaimed its quota' })
      )
    ).toBe(
      'Being preempted: the team it borrowed from wants its GPUs back: team-b reclaimed its quota'
    );
    expect(explainJob(job({ phase: 'Pending', reason: 'Requeued' }))).toBe(
      'Preempted and requeued'
    );
  });
});

describe('phaseLabel', () => {
  it('says Cancelled, neutral, for a job its user cancelled, and the phase otherwise', () => {
    expect(phaseLabel(job({ phase: 'Failed', reason: 'Cancelled' }))).toEqual({
      text: 'Cancelled',
      level: 'cancelled'
    });
    expect(phaseLabel(job({ phase: 'Failed', reason: 'Error' }))).toEqual({
      text: 'Failed',
      level: 'failed'
    });
    expect(phaseLabel(job({ phase: 'Running' }))).toEqual({
      text: 'Running',
      level: 'running'
    });
  });

  it("explains a cancel by who cancelled it, without repeating the badge's word", () => {
    expect(
      explainJob(
        job({
          phase: 'Failed',
          reason: 'Cancelled',
          message: 'cancelled by ana'
        })
      )
    ).toBe('Cancelled by ana');
  });
});

describe('memoryLine of a CPU-only job', () => {
  it('is empty: a job without GPUs has no per-GPU memory', () => {
    expect(memoryLine(job({ gpus: 0, memory }))).toBe('');
    expect(memoryLine(job({ gpus: 1, memory }))).toBe(
      'estimated 3.1 GiB (2.8–3.5) per GPU'
    );
  });
});
