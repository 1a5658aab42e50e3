/**
 * Kubernetes quantities and quota keys in words a person reads at a glance:
 * `96 GiB of 128 GiB left`, `1 of 2 GPUs left`. Pure functions, no DOM.
 */

import { IResourceBalance } from './tokens';

/**
 * What a quota key measures, and how to say an amount of it.
 */
export type ResourceKind = 'gpu' | 'cpu' | 'memory' | 'storage' | 'count';

/**
 * A quota key described for the sidebar.
 */
export interface IResourceInfo {
  /** The quota key, e.g. `requests.nvidia.com/gpu`. */
  key: string;
  kind: ResourceKind;
  /** `GPU`, `CPU`, `Memory`, `Pods`, ... */
  label: string;
  /** `requests`, `limits`, or '' for keys that are neither (pods, jobs). */
  side: 'requests' | 'limits' | '';
  /** Sort order: GPU, CPU, memory, storage, counts; requests before limits. */
  order: number;
}

/**
 * Kubernetes' quota words in plain words: what the views show, with the
 * Kubernetes word and its meaning one hover away (`title`).
 */
export const GLOSSARY = {
  hard: {
    word: 'allowed',
    title:
      'hard: the most the team may hold at once (its ResourceQuota’s spec.hard)'
  },
  requests: {
    word: 'reserved',
    title: 'requests: what jobs reserve when they start; the quota counts these'
  },
  limits: {
    word: 'ceiling',
    title:
      'limits: the most a job may use before it is throttled (CPU) or stopped (memory)'
  }
} as const;

/**
 * One balance line, ready to draw.
 */
export interface IBalanceLine extends IResourceInfo {
  hard: number;
  used: number;
  remaining: number;
  /** `remaining` as a share of hard, 0 to 1 (0 when hard is 0). */
  fractionRemaining: number;
  level: Level;
  /** `96 GiB of 128 GiB left`. */
  text: string;
}

/**
 * How much is left, for colouring: ok (half or more), warn (a fifth or more), low.
 */
export type Level = 'ok' | 'warn' | 'low';

const SUFFIXES: { [suffix: string]: number } = {
  '': 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60
};

const QUANTITY =
  /^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(?:[eE]([+-]?[0-9]+))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$/;

/**
 * The value of a Kubernetes quantity string (`"500m"` is 0.5, `"16Gi"` is
 * 17179869184). Throws on a string that is not a quantity.
 */
export function parseQuantity(quantity: string | number): number {
  if (typeof quantity === 'number') {
    return quantity;
  }
  const match = QUANTITY.exec(quantity.trim());
  if (!match) {
    throw new Error(`not a Kubernetes quantity: ${JSON.stringify(quantity)}`);
  }
  const [, number, exponent, suffix] = match;
  const value = parseFloat(number) * (exponent ? 10 ** parseInt(exponent) : 1);
  return value * SUFFIXES[suffix ?? ''];
}

/**
 * A byte count in binary units with at most one decimal: `96 GiB`, `1.5 MiB`.
 */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${bytes < 0 ? '-' : ''}${trim(value)} ${units[unit]}`;
}

/**
 * A GiB figure as the estimator states it: `23.4 GiB`.
 */
export function formatGiB(bytes: number): string {
  return `${trim(bytes / 2 ** 30)} GiB`;
}

/**
 * An amount of `kind`, with its unit: `96 GiB`, `6 CPUs`, `0.5 CPU`, `1 GPU`.
 * Counts are bare numbers (the label names the object).
 */
export function formatAmount(value: number, kind: ResourceKind): string {
  switch (kind) {
    case 'memory':
    case 'storage':
      return formatBytes(value);
    case 'cpu':
      return `${trim(value, 3)} ${value <= 1 ? 'CPU' : 'CPUs'}`;
    case 'gpu':
      return `${trim(value)} ${value === 1 ? 'GPU' : 'GPUs'}`;
    default:
      return trim(value);
  }
}

/**
 * `96 GiB of 128 GiB left`, `6 of 8 CPUs left`, `1 of 2 GPUs left`, `3 of 10 pods left`.
 */
export function remainingText(
  remaining: number,
  hard: number,
  info: Pick<IResourceInfo, 'kind' | 'label'>
): string {
  if (info.kind === 'memory' || info.kind === 'storage') {
    return `${formatBytes(remaining)} of ${formatBytes(hard)} left`;
  }
  if (info.kind === 'count') {
    return `${trim(remaining)} of ${trim(hard)} ${info.label.toLowerCase()} left`;
  }
  return `${trim(remaining, 3)} of ${formatAmount(hard, info.kind)} left`;
}

/**
 * The colour level of a share left.
 */
export function levelOf(fractionRemaining: number): Level {
  if (fractionRemaining >= 0.5) {
    return 'ok';
  }
  return fractionRemaining >= 0.2 ? 'warn' : 'low';
}

/**
 * What a quota key measures: `requests.nvidia.com/gpu` is the GPU requests,
 * `limits.memory` the memory limits, `count/jobs.batch` the jobs.
 */
export function describeKey(key: string): IResourceInfo {
  let side: IResourceInfo['side'] = '';
  let name = key;
  if (key.startsWith('requests.')) {
    side = 'requests';
    name = key.slice('requests.'.length);
  } else if (key.startsWith('limits.')) {
    side = 'limits';
    name = key.slice('limits.'.length);
  } else if (key === 'cpu' || key === 'memory' || key === 'ephemeral-storage') {
    side = 'requests'; // the bare keys are the requests
  }
  const known = KNOWN[name];
  const kind: ResourceKind = known
    ? known[1]
    : name.endsWith('/gpu')
      ? 'gpu'
      : 'count';
  const label = known ? known[0] : kind === 'gpu' ? 'GPU' : name;
  const rank = known ? known[2] : kind === 'gpu' ? 0 : 90;
  return {
    key,
    kind,
    label,
    side,
    order: rank * 10 + (side === 'limits' ? 1 : 0)
  };
}

/** Known resource names: [label, kind, rank]. */
const KNOWN: { [name: string]: [string, ResourceKind, number] } = {
  'nvidia.com/gpu': ['GPU', 'gpu', 0],
  'amd.com/gpu': ['GPU', 'gpu', 0],
  cpu: ['CPU', 'cpu', 1],
  memory: ['Memory', 'memory', 2],
  'ephemeral-storage': ['Ephemeral storage', 'storage', 3],
  storage: ['Storage', 'storage', 4],
  persistentvolumeclaims: ['PVCs', 'count', 5],
  pods: ['Pods', 'count', 6],
  'count/jobs.batch': ['Jobs', 'count', 7],
  'count/pods': ['Pods', 'count', 6]
};

/**
 * The lines of a balance, in display order (GPU, CPU, memory, ..., counts;
 * requests before limits).
 */
export function balanceLines(resources: {
  [key: string]: IResourceBalance;
}): IBalanceLine[] {
  return Object.keys(resources)
    .map(key => balanceLine(key, resources[key]))
    .sort((a, b) => a.order - b.order || a.key.localeCompare(b.key));
}

/**
 * One line of a balance: numbers, share left, colour level and text.
 */
export function balanceLine(
  key: string,
  balance: IResourceBalance
): IBalanceLine {
  const info = describeKey(key);
  const hard = parseQuantity(balance.hard);
  const used = parseQuantity(balance.used);
  const remaining = parseQuantity(balance.remaining);
  const fractionRemaining = hard > 0 ? clamp(remaining / hard) : 0;
  return {
    ...info,
    hard,
    used,
    remaining,
    fractionRemaining,
    level: levelOf(fractionRemaining),
    text: remainingText(remaining, hard, info)
  };
}

/**
 * A duration in seconds said briefly: `5 s`, `3 min`, `2 h`, `4 d`.
 */
export function formatAge(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min`;
  }
  if (s < 86400) {
    return `${Math.floor(s / 3600)} h`;
  }
  return `${Math.floor(s / 86400)} d`;
}

/**
 * Seconds from an RFC 3339 time to `now` (0 for a time that does not parse).
 */
export function ageSeconds(
  time: string | null | undefined,
  now: number
): number {
  const then = time ? Date.parse(time) : NaN;
  return isNaN(then) ? 0 : Math.max(0, (now - then) / 1000);
}

function clamp(value: number): number {
  return Math.min(1, Math.max(0, value));
}

/**
 * A number with at most `digits` decimals and no trailing zeros.
 */
function trim(value: number, digits = 1): string {
  return String(parseFloat(value.toFixed(digits)));
}
