import {
  canCancel,
  describeChange,
  explainJob,
  jobsShownLine,
  magicLine,
  planSummary,
  splitArgs,
  swiftArgs
} from '../jobs';
import { IIdentity, IJob, IPlan } from '../tokens';

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

describe('plans in words', () => {
  const plan = (args: string[], gpus = 1): IPlan => ({
    args,
    gpus,
    resources: { requests: {}, limits: {} },
    estimate: {
      peak_bytes_per_gpu: 0,
      peak_gib_per_gpu: 23.44,
      breakdown: {
        weights: 0,
        gradients: 0,
        optimizer: 0,
        activations: 0,
        logits: 0,
        overhead: 0
      }
    }
  });

  it('summarises a plan', () => {
    expect(planSummary(plan(['--tuner_type', 'lora']))).toBe(
      'LoRA · 1 GPU · 23.4 GiB per GPU'
    );
    expect(
      planSummary(plan(['--tuner_type', 'lora', '--quant_bits', '4'], 2))
    ).toBe('QLoRA 4-bit · 2 GPUs · 23.4 GiB per GPU');
    expect(
      planSummary(plan(['--tuner_type=full', '--deepspeed', 'zero3'], 2))
    ).toBe('Full fine-tune · 2 GPUs · 23.4 GiB per GPU · DeepSpeed zero3');
  });

  it('says a change of any shape', () => {
    expect(describeChange('batch size 8 -> 2')).toBe('batch size 8 -> 2');
    expect(
      describeChange({
        arg: '--per_device_train_batch_size',
        why: 'fits in 80 GiB'
      })
    ).toBe('--per_device_train_batch_size: fits in 80 GiB');
    expect(describeChange({ x: 1 })).toBe('{"x":1}');
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
