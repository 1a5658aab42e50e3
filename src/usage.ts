/**
 * The usage views' data: which `GET usage` and `GET chargeback` query each
 * view sends, and the answers shaped for Recharts and the tables (one point
 * per time bucket, zero-filled; the caller's own share; teams and top holders
 * ranked). Pure: no JupyterLab imports, unit-tested in plain Node.
 */

import {
  IChargeback,
  IChargebackFigures,
  IUsage,
  IUsageRow,
  UsageBy
} from './tokens';

/** The usage figures a chart can show, each in resource-seconds as the API answers. */
export type UsageResource = 'gpuSeconds' | 'cpuSeconds' | 'memoryGibSeconds';

/** The resources in the order the views offer them, with the unit of their hours. */
export const USAGE_RESOURCES: { key: UsageResource; label: string }[] = [
  { key: 'gpuSeconds', label: 'GPU-hours' },
  { key: 'cpuSeconds', label: 'CPU-hours' },
  { key: 'memoryGibSeconds', label: 'Memory GiB-hours' }
];

/** A time range a chart covers, and the width of its buckets, in seconds. */
export interface IUsageRange {
  id: string;
  label: string;
  seconds: number;
  step: number;
}

const HOUR = 3600;
const DAY = 24 * HOUR;

/** The ranges the sidebar switches between: the last 24 hours by the hour, the last 7 days by 6 hours. */
export const USAGE_RANGES: IUsageRange[] = [
  { id: '24h', label: '24 hours', seconds: DAY, step: HOUR },
  { id: '7d', label: '7 days', seconds: 7 * DAY, step: 6 * HOUR }
];

/** One `GET usage` query (the route's parameters). */
export interface IUsageQuery {
  since: string;
  until: string;
  by: UsageBy;
  step?: number;
  namespace?: string;
}

/**
 * The query for `range` ending now: `since` rounded down to a multiple of the
 * step (so buckets start on whole hours, whatever convention the server
 * aligns them by), with the step unless `totals` (one row per group, no buckets).
 */
export function usageQuery(
  range: IUsageRange,
  now: number,
  by: UsageBy,
  options: { namespace?: string; totals?: boolean } = {}
): IUsageQuery {
  const stepMs = range.step * 1000;
  const since = Math.floor((now - range.seconds * 1000) / stepMs) * stepMs;
  const query: IUsageQuery = {
    since: rfc3339(since),
    until: rfc3339(now),
    by
  };
  if (!options.totals) {
    query.step = range.step;
  }
  if (options.namespace) {
    query.namespace = options.namespace;
  }
  return query;
}

/** `usage?since=…&until=…&by=…[&step=…][&namespace=…]`, relative to `quota/v1/`. */
export function usagePath(query: IUsageQuery): string {
  const params = new URLSearchParams({
    since: query.since,
    until: query.until,
    by: query.by
  });
  if (query.step) {
    params.set('step', String(query.step));
  }
  if (query.namespace) {
    params.set('namespace', query.namespace);
  }
  return `usage?${params.toString()}`;
}

/** `chargeback?month=YYYY-MM[&format=csv]`, relative to `quota/v1/`. */
export function chargebackPath(month: string, csv = false): string {
  const params = new URLSearchParams({ month });
  if (csv) {
    params.set('format', 'csv');
  }
  return `chargeback?${params.toString()}`;
}

/**
 * The address of a month's chargeback CSV under the server's `baseUrl`: a plain
 * link, as JupyterLab's own file downloads are (the session cookie authenticates it).
 */
export function chargebackCsvUrl(baseUrl: string, month: string): string {
  const base = baseUrl.endsWith('/') ? baseUrl : baseUrl + '/';
  return new URL(`quota/v1/${chargebackPath(month, true)}`, base).toString();
}

/** Whether `text` is a month as the chargeback route takes it (`YYYY-MM`). */
export function isMonth(text: string): boolean {
  return /^\d{4}-(0[1-9]|1[0-2])$/.test(text);
}

/** The month (UTC, `YYYY-MM`) that `now` falls in. */
export function monthOf(now: number): string {
  return new Date(now).toISOString().slice(0, 7);
}

/** One bar of a usage chart: the bucket's start (ms) and the hours of the caller and of the others. */
export interface IUsagePoint {
  start: number;
  mine: number;
  others: number;
}

/**
 * The buckets of a stepped `by=user` answer as chart points, in hours of
 * `resource`, split into `user`'s own and everyone else's. Every bucket from
 * `since` to `until` is there, zero when the answer has no row for it; a row
 * lands in the bucket its `start` falls in.
 */
export function usageSeries(
  answer: IUsage,
  resource: UsageResource,
  user: string
): IUsagePoint[] {
  const step = (answer.step ?? 0) * 1000;
  const since = Date.parse(answer.since);
  const until = Date.parse(answer.until);
  if (!(step > 0) || !(until > since)) {
    return [];
  }
  const count = Math.ceil((until - since) / step);
  const points: IUsagePoint[] = [];
  for (let i = 0; i < count; i++) {
    points.push({ start: since + i * step, mine: 0, others: 0 });
  }
  for (const row of answer.rows) {
    const start = row.start ? Date.parse(row.start) : NaN;
    const index = Math.floor((start - since) / step);
    const point = points[index];
    if (!point) {
      continue;
    }
    const hours = row[resource] / HOUR;
    if (row.user === user) {
      point.mine += hours;
    } else {
      point.others += hours;
    }
  }
  return points;
}

/** The caller's share of a namespace's usage, in hours. */
export interface IUsageShare {
  mine: number;
  total: number;
  /** `mine / total`, or null when nothing was used. */
  fraction: number | null;
}

export function usageShare(
  rows: IUsageRow[],
  resource: UsageResource,
  user: string
): IUsageShare {
  let mine = 0;
  let total = 0;
  for (const row of rows) {
    total += row[resource];
    if (row.user === user) {
      mine += row[resource];
    }
  }
  return {
    mine: mine / HOUR,
    total: total / HOUR,
    fraction: total > 0 ? mine / total : null
  };
}

/** One line of a ranking: who (a team's namespace or a user) and their hours of each resource. */
export interface IUsageTotal {
  key: string;
  /** The team, for a namespace's line; the namespaces, for a user's. */
  detail: string;
  gpuHours: number;
  cpuHours: number;
  memoryGibHours: number;
  cost: number | null;
}

/**
 * Rows summed per `key` (the namespace for `by=team`, the user for `by=user`),
 * heaviest first: by GPU-hours, then CPU-hours, then name.
 */
export function usageTotals(
  rows: IUsageRow[],
  key: 'namespace' | 'user'
): IUsageTotal[] {
  const totals = new Map<string, IUsageTotal & { details: Set<string> }>();
  for (const row of rows) {
    const name = (key === 'user' ? row.user : row.namespace) ?? '';
    let total = totals.get(name);
    if (!total) {
      total = {
        key: name,
        detail: '',
        gpuHours: 0,
        cpuHours: 0,
        memoryGibHours: 0,
        cost: null,
        details: new Set()
      };
      totals.set(name, total);
    }
    total.gpuHours += row.gpuSeconds / HOUR;
    total.cpuHours += row.cpuSeconds / HOUR;
    total.memoryGibHours += row.memoryGibSeconds / HOUR;
    if (row.cost !== null && row.cost !== undefined) {
      total.cost = (total.cost ?? 0) + row.cost;
    }
    total.details.add(key === 'user' ? row.namespace : row.team);
  }
  return [...totals.values()]
    .map(({ details, ...total }) => ({
      ...total,
      detail: [...details].sort().join(', ')
    }))
    .sort(
      (a, b) =>
        b.gpuHours - a.gpuHours ||
        b.cpuHours - a.cpuHours ||
        a.key.localeCompare(b.key)
    );
}

/**
 * Hours for a table cell or a tooltip, to 3 significant digits or the whole
 * hour (`0.25`, `4.92`, `17.2`, `611`, `20090`); `<0.01` for a trace.
 */
export function formatHours(hours: number): string {
  if (hours === 0) {
    return '0';
  }
  if (hours < 0.01) {
    return '<0.01';
  }
  const digits = hours < 10 ? 2 : hours < 100 ? 1 : 0;
  return String(Number(hours.toFixed(digits)));
}

/**
 * A value axis from 0 to at least `max`: round ticks (1, 2 or 5 times a power
 * of ten) and labels with just the decimals that keep each one distinct (a
 * small range's ticks 0, 0.005, 0.01 read `0.005`, never `<0.01` twice).
 */
export function axisTicks(
  max: number,
  count = 5
): { ticks: number[]; label: (value: number) => string } {
  const top = max > 0 ? max : 1;
  const raw = top / (count - 1);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step =
    [1, 2, 5, 10].map(m => m * power).find(s => s >= raw * (1 - 1e-9)) ??
    10 * power;
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  const ticks: number[] = [];
  for (let i = 0; i <= Math.ceil(top / step - 1e-9); i++) {
    ticks.push(Number((i * step).toFixed(decimals)));
  }
  return { ticks, label: value => String(Number(value.toFixed(decimals))) };
}

/** "You: 3.5 of 10 GPU-hours (35%)", or that nothing was used. */
export function shareText(share: IUsageShare, unit: string): string {
  if (share.fraction === null) {
    return `No ${unit} used in this range.`;
  }
  const percent = Math.round(share.fraction * 100);
  return `You: ${formatHours(share.mine)} of ${formatHours(share.total)} ${unit} (${percent}%)`;
}

function rfc3339(ms: number): string {
  // Whole seconds: the server parses RFC 3339 with or without fractions.
  return new Date(Math.floor(ms / 1000) * 1000)
    .toISOString()
    .replace('.000Z', 'Z');
}

/** What the usage views need from the server (`QuotaClient` in `client.ts`). */
export interface IUsageClient {
  usage(query: IUsageQuery): Promise<IUsage>;
}

/** What the chargeback view needs from the server (admins only). */
export interface IChargebackClient {
  chargeback(month: string): Promise<IChargeback>;
  chargebackCsvUrl(month: string): string;
}

/** A chargeback's team rows (keyed by namespace) and its totals row, for the hours table. */
export function chargebackLines(report: IChargeback): {
  rows: IUsageTotal[];
  total: IUsageTotal;
} {
  const line = (key: string, detail: string, f: IChargebackFigures) => ({
    key,
    detail,
    gpuHours: f.gpuHours,
    cpuHours: f.cpuHours,
    memoryGibHours: f.memoryGibHours,
    cost: f.cost
  });
  return {
    rows: report.rows.map(r => line(r.namespace, `team ${r.team}`, r)),
    total: line('Total', '', report.totals)
  };
}
