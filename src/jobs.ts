/**
 * Jobs and ms-swift argv in plain words: why a job waits or failed, what may
 * be cancelled, and the `%swift_sft` line that launches a plan from a notebook.
 * Pure functions, no DOM.
 */

import { IIdentity, IJob, IPlan, IPlanChange } from './tokens';

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
  if (reason === 'Cancelled' && message) {
    // `cancelled by ann`: the phase badge already says Cancelled.
    return message.charAt(0).toUpperCase() + message.slice(1);
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
    return 'Waiting to start (for GPUs other jobs hold, or for the cluster to schedule it).';
  }
  return reason ? splitWords(reason) : 'The job failed; its log may say why.';
}

/**
 * A job's estimate and measured peak in words: `estimated 14.2 GiB
 * (12.9–16.1) per GPU, measured 15 GiB`; empty for a job without `memory`
 * and for a job that asks for no GPU.
 */
export function memoryLine(job: IJob): string {
  const memory = job.memory;
  // A CPU-only job holds no GPU memory: a per-GPU figure would mislead.
  if (!memory || job.gpus === 0) {
    return '';
  }
  let text = `estimated ${memory.estimatedGib} GiB`;
  if (memory.rangeGib) {
    text += ` (${memory.rangeGib[0]}–${memory.rangeGib[1]})`;
  }
  text += ' per GPU';
  if (memory.measuredGib !== null && memory.measuredGib !== undefined) {
    text += `, measured ${memory.measuredGib} GiB`;
  }
  return memory.outOfMemory ? `${text}, out of memory` : text;
}

/**
 * A job's phase as the views show it: a Failed job its user cancelled says
 * `Cancelled`, in a neutral colour (`level` names the CSS modifier); other
 * phases are shown as they are.
 */
export function phaseLabel(job: IJob): { text: string; level: string } {
  if (job.phase === 'Failed' && job.reason === 'Cancelled') {
    return { text: 'Cancelled', level: 'cancelled' };
  }
  return { text: job.phase, level: job.phase.toLowerCase() };
}

/**
 * Whether the sidebar offers `identity` the next plan down for `job`: it ran
 * out of GPU memory, and it is theirs (or they are an admin).
 */
export function canRetry(job: IJob, identity: IIdentity | null): boolean {
  if (!identity || job.phase !== 'Failed' || job.reason !== 'OutOfMemory') {
    return false;
  }
  return identity.admin || job.owner === identity.name;
}

/** Reason codes the backends use, said plainly. */
const REASONS: { [reason: string]: string } = {
  OutOfMemory: 'Ran out of GPU memory',
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
  ErrImageNeverPull: 'Its image is not on the node',
  ImagePullBackOff: 'Its image cannot be pulled',
  ErrImagePull: 'Its image cannot be pulled',
  InvalidImageName: 'Its image name is not valid',
  Error: 'The trainer failed',
  WaitingForQuota: "Waiting for the team's quota",
  WaitingForBorrowing: 'Waiting for GPUs other teams leave idle',
  WaitingForPreemption: 'Waiting for preempted jobs to stop',
  Reclaimed: 'Being preempted: the team it borrowed from wants its GPUs back',
  PreemptedByPriority: 'Being preempted by a higher-priority job of its team',
  WindowClosed: "Being preempted: the team's quota window closed",
  Preempted: 'Preempted by the scheduler for a higher-priority pod',
  Requeued: 'Preempted and requeued'
};

/**
 * The flag of a stalled job ('' when it is not): since when, and what is
 * wrong, e.g. `Stalled since 2026-11-30 10:05 UTC: no log output for 31
 * minutes (…)`.
 */
export function stalledLine(job: IJob): string {
  const stalled = job.stalled;
  if (!stalled || job.phase !== 'Running') {
    return '';
  }
  const since = stalled.since.replace('T', ' ').replace(/:\d\dZ$/, ' UTC');
  return `Stalled since ${since}: ${stalled.message}`;
}

/**
 * The job's priority and what elastic quota did to it, one short line each
 * (the magic's widget says the same: `magics/follow.py` `elastic_lines`):
 * running on borrowed GPUs, preempted at step N, requeued, resumed.
 */
export function elasticLines(job: IJob): string[] {
  const lines: string[] = [];
  if (job.priority && job.priority !== 'normal') {
    lines.push(`${job.priority} priority`);
  }
  if (job.phase === 'Running' && job.borrowed) {
    lines.push('running on borrowed GPUs');
  }
  for (const event of job.history ?? []) {
    const checkpoint = event.checkpoint;
    switch (event.event) {
      case 'Borrowed':
        lines.push('started on borrowed GPUs');
        break;
      case 'Preempted': {
        const step =
          event.step !== undefined && event.step !== null
            ? ` at step ${event.step}`
            : '';
        lines.push(`preempted${step} (${event.reason})`);
        break;
      }
      case 'Requeued':
        lines.push(
          checkpoint
            ? `requeued, to resume from ${checkpoint}`
            : 'requeued, to start again'
        );
        break;
      case 'Resumed':
        lines.push(`resumed from ${checkpoint}`);
        break;
    }
  }
  return lines;
}

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
 * One change a plan made to the request, as the CLI says it:
 * `gpus: 1 → 2 (spreads the work over 2 GPUs)`; `default` for ms-swift's own.
 */
export function changeText(change: IPlanChange): string {
  const shown = (value: IPlanChange['from']) =>
    value === null ? 'default' : String(value);
  return `${change.field}: ${shown(change.from)} → ${shown(change.to)} (${change.why})`;
}

function splitWords(code: string): string {
  const words = code.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}
