/**
 * Jobs and ms-swift argv in plain words: why a job waits or failed, what may
 * be cancelled, and the `%swift_sft` line that launches a plan from a notebook.
 * Pure functions, no DOM.
 */

import { IIdentity, IJob, IPlan } from './tokens';

/**
 * Why a job is pending or failed, in words a person acts on, or '' when
 * nothing needs saying (a job that runs or succeeded).
 */
export function explainJob(job: IJob): string {
  const message = (job.message ?? '').trim();
  const reason = job.reason ?? '';
  if (job.phase === 'Succeeded' || (job.phase === 'Running' && !reason)) {
    return '';
  }
  const plain = REASONS[reason];
  if (plain) {
    return message ? `${plain}: ${message}` : plain;
  }
  if (
    job.phase === 'Failed' &&
    job.exitCode !== undefined &&
    job.exitCode !== null
  ) {
    const head = `The trainer exited with code ${job.exitCode}`;
    return message ? `${head}: ${message}` : head;
  }
  if (message) {
    return reason ? `${splitWords(reason)}: ${message}` : message;
  }
  if (job.phase === 'Pending') {
    return 'Waiting to start (for free GPUs or for the cluster to schedule it).';
  }
  return reason ? splitWords(reason) : 'The job failed; its log may say why.';
}

/** Reason codes the backends use, said plainly. */
const REASONS: { [reason: string]: string } = {
  ExceededQuota: 'Refused by the team quota',
  FailedQuota: 'The team quota could not be checked',
  LimitRangeViolation: "Refused by the namespace's LimitRange",
  FailedCreate: 'Kubernetes could not create its pod',
  Unschedulable: 'No node has room for it yet',
  WaitingForResources: 'Waiting for GPUs, CPU or memory held by other jobs',
  StartError: 'The trainer could not be started',
  Terminating: 'Stopping',
  Cancelled: 'Cancelled',
  BackoffLimitExceeded: 'Failed too many times and was given up',
  DeadlineExceeded: 'Ran past its deadline and was stopped',
  Lost: 'Lost: the process was gone when the server restarted',
  OOMKilled: 'Killed for running out of memory',
  Error: 'The trainer failed'
};

/**
 * The line under a job list that leaves older jobs out ('' when it shows
 * them all): `Showing the newest 100 of 1,234 jobs`.
 */
export function jobsShownLine(shown: number, older: number): string {
  if (older <= 0) {
    return '';
  }
  const count = (n: number) => n.toLocaleString('en-US');
  return `Showing the newest ${count(shown)} of ${count(shown + older)} jobs`;
}

/**
 * Whether `identity` may cancel `job`: its owner or an admin, while it is
 * pending or running.
 */
export function canCancel(job: IJob, identity: IIdentity | null): boolean {
  if (!identity || (job.phase !== 'Pending' && job.phase !== 'Running')) {
    return false;
  }
  return identity.admin || job.owner === identity.name;
}

/**
 * The planner form's fields.
 */
export interface IPlanRequest {
  model: string;
  tuner: Tuner;
  maxLength: number;
  batchSize: number;
  gpus: number;
  dataset: string;
  /** Further ms-swift arguments as typed (split on white space, quotes kept together). */
  extra: string;
}

/**
 * The tuners the form offers; QLoRA is LoRA over a bitsandbytes-quantised base.
 */
export type Tuner = 'lora' | 'qlora4' | 'qlora8' | 'full';

export const TUNERS: { value: Tuner; label: string }[] = [
  { value: 'lora', label: 'LoRA' },
  { value: 'qlora4', label: 'QLoRA 4-bit' },
  { value: 'qlora8', label: 'QLoRA 8-bit' },
  { value: 'full', label: 'Full fine-tune' }
];

/**
 * The ms-swift 4.x `sft` arguments for the form's fields (the GPU count is not
 * an ms-swift argument: it travels as `gpus`).
 */
export function swiftArgs(request: IPlanRequest): string[] {
  const args = ['--model', request.model.trim()];
  if (request.tuner === 'full') {
    args.push('--tuner_type', 'full');
  } else {
    args.push('--tuner_type', 'lora');
    if (request.tuner !== 'lora') {
      args.push(
        '--quant_method',
        'bnb',
        '--quant_bits',
        request.tuner === 'qlora4' ? '4' : '8'
      );
    }
  }
  args.push('--max_length', String(request.maxLength));
  args.push('--per_device_train_batch_size', String(request.batchSize));
  if (request.dataset.trim()) {
    args.push('--dataset', request.dataset.trim());
  }
  return args.concat(splitArgs(request.extra));
}

/**
 * The `%swift_sft` line for `plan` in `namespace`: with `asIs` (a plan the
 * planner made) it submits exactly these arguments; without, the magic plans
 * them against the balance first.
 */
export function magicLine(
  namespace: string,
  plan: Pick<IPlan, 'args' | 'gpus'>,
  asIs = true
): string {
  const head = [
    '%swift_sft',
    '--namespace',
    namespace,
    '--gpus',
    String(plan.gpus)
  ];
  if (asIs) {
    head.push('--as-is');
  }
  return head.concat(plan.args.map(quoteArg)).join(' ');
}

/**
 * Split a typed argument string on white space, keeping quoted parts together.
 */
export function splitArgs(text: string): string[] {
  const args: string[] = [];
  const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let match: RegExpExecArray | null;
  while ((match = pattern.exec(text)) !== null) {
    args.push(match[1] ?? match[2] ?? match[3]);
  }
  return args;
}

/**
 * An argument as a shell or IPython line would need it written.
 */
export function quoteArg(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "'\\''")}'`;
}

/**
 * A one-line summary of a plan: `LoRA · 1 GPU · 23.4 GiB per GPU`.
 */
export function planSummary(plan: IPlan): string {
  const tuner = tunerOf(plan.args);
  const gpus = `${plan.gpus} ${plan.gpus === 1 ? 'GPU' : 'GPUs'}`;
  const parts = [tuner, gpus];
  const gib = plan.estimate?.peak_gib_per_gpu;
  if (typeof gib === 'number') {
    parts.push(`${gib.toFixed(1)} GiB per GPU`);
  }
  const deepspeed = argValue(plan.args, '--deepspeed');
  if (deepspeed) {
    parts.push(`DeepSpeed ${deepspeed}`);
  }
  return parts.join(' · ');
}

/**
 * The tuner an argv asks for, in words.
 */
export function tunerOf(args: string[]): string {
  const tuner =
    argValue(args, '--tuner_type') ?? argValue(args, '--train_type') ?? 'lora';
  const bits = argValue(args, '--quant_bits');
  if (tuner === 'full') {
    return 'Full fine-tune';
  }
  if (bits) {
    return `QLoRA ${bits}-bit`;
  }
  return tuner === 'lora' ? 'LoRA' : tuner;
}

/**
 * The value after `flag` in an argv (`--flag value` or `--flag=value`).
 */
export function argValue(args: string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) {
      return args[i + 1];
    }
    if (args[i].startsWith(flag + '=')) {
      return args[i].slice(flag.length + 1);
    }
  }
  return undefined;
}

/**
 * A plan's change, whatever shape the planner gives it, as a sentence.
 */
export function describeChange(change: unknown): string {
  if (typeof change === 'string') {
    return change;
  }
  if (change && typeof change === 'object') {
    const c = change as { [key: string]: unknown };
    for (const key of ['message', 'reason', 'why', 'description']) {
      if (typeof c[key] === 'string') {
        const what = c.arg ?? c.name ?? c.field;
        return what ? `${String(what)}: ${c[key]}` : String(c[key]);
      }
    }
    return JSON.stringify(change);
  }
  return String(change);
}

function splitWords(code: string): string {
  const words = code.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}
