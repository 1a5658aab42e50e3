/**
 * The quota-from-history views' data: `GET recommendations` rows in words,
 * a row's demand series as chart points, a recommendation applied to a team
 * profile (the body of `PUT profiles/{team}`), and the capacity curve's
 * points. Pure: no JupyterLab imports, unit-tested in plain Node.
 */

import { parseQuantity } from './quantity';
import {
  ICapacityCurve,
  IDemandSeries,
  IProfile,
  IRecommendation,
  IRecommendationList,
  IReplay,
  IReplayRequest
} from './tokens';

/** What the recommendation views need from the server (`QuotaClient` in `client.ts`). */
export interface IRecommendationClient {
  /** `GET recommendations` (with each row's `series` when asked). */
  recommendations(series?: boolean): Promise<IRecommendationList>;
}

/** What the capacity curve needs (admins): `POST replay`. */
export interface IReplayClient {
  replay(request: IReplayRequest): Promise<IReplay>;
}

/** One point of a demand plot: the bucket's start (ms), its peak demand and what ran, and the quota. */
export interface IDemandPoint {
  start: number;
  demand: number;
  held: number;
  quota: number | null;
}

/** A row's series as chart points, one per bucket from `since`. */
export function demandPoints(series: IDemandSeries): IDemandPoint[] {
  const since = Date.parse(series.since);
  const step = series.step * 1000;
  return series.demand.map((demand, i) => ({
    start: since + i * step,
    demand,
    held: series.held[i] ?? 0,
    quota: series.quota
  }));
}

/** A quantity in the series' unit (GiB for memory, cores, GPUs); null for none or a bad one. */
export function inUnits(quantity: string | null, unit: string): number | null {
  if (quantity === null) {
    return null;
  }
  try {
    const value = parseQuantity(quantity) / (unit === 'GiB' ? 2 ** 30 : 1);
    return Math.round(value * 1000) / 1000;
  } catch {
    return null;
  }
}

/** The key of a row (a team has a row per quota resource). */
export function rowKey(row: IRecommendation): string {
  return `${row.team}/${row.resource}`;
}

/** A share (0-1) as a whole percent, `–` when there is none (no quota on the resource). */
export function percent(share: number | null): string {
  return share === null ? '–' : `${Math.round(share * 100)}%`;
}

/** Seconds as `2 h 10 m`, `45 m`, `30 s`, `3 d 4 h` (as the explanation says them); `–` for none. */
export function duration(seconds: number | null): string {
  if (seconds === null) {
    return '–';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s} s`;
  }
  const minutes = Math.floor(s / 60) % 60;
  const hours = Math.floor(s / 3600);
  if (hours >= 24) {
    const rest = hours % 24;
    return rest ? `${Math.floor(hours / 24)} d ${rest} h` : `${hours / 24} d`;
  }
  if (hours) {
    return minutes ? `${hours} h ${minutes} m` : `${hours} h`;
  }
  return `${minutes} m`;
}

/** Whether Apply would change anything: the recommendation differs from the quota now. */
export function changesQuota(row: IRecommendation): boolean {
  return row.current !== row.recommended;
}

/**
 * The team's stored profile with the row's resource set to the recommended
 * quantity: the whole body `PUT profiles/{team}` takes (it replaces the profile).
 */
export function appliedProfile(
  stored: IProfile,
  row: IRecommendation
): IProfile {
  return {
    ...stored,
    hard: { ...(stored.hard ?? {}), [row.resource]: row.recommended }
  };
}

/** One point of the capacity chart: GPUs, the worst team's p90 wait in hours, the cost. */
export interface ICapacityPoint {
  gpus: number;
  waitHours: number;
  cost: number | null;
}

export function capacityPoints(curve: ICapacityCurve): ICapacityPoint[] {
  return [...curve.points]
    .sort((a, b) => a.gpus - b.gpus)
    .map(p => ({
      gpus: p.gpus,
      waitHours: Math.round((p.worstWaitP90Seconds / 3600) * 100) / 100,
      cost: p.cost
    }));
}

/** The curve's answer in words: how many GPUs keep every team's p90 wait within the target,
 * and the jobs the teams' own quotas refuse there (waits count started jobs only, and no cluster
 * size admits a job its team's quota refuses: jupyter_quota/replay.py). */
export function capacityLine(curve: ICapacityCurve): string {
  const target = duration(curve.waitTargetSeconds);
  if (curve.gpusForWaitTarget === null) {
    const refused = Math.min(...curve.points.map(p => p.refused));
    const note =
      curve.points.length > 0 && refused > 0
        ? ` At every size tried, at least ${jobs(refused)} refused by their teams' quotas.`
        : '';
    return `No cluster size tried keeps every team's p90 wait within ${target}.${note}`;
  }
  const point = curve.points.find(p => p.gpus === curve.gpusForWaitTarget);
  const cost =
    point && point.cost !== null
      ? ` (${formatCost(point.cost, curve.currency)} for the window)`
      : '';
  const note =
    point && point.refused > 0
      ? ` ${jobs(point.refused, true)} still refused there by their teams' quotas, which more GPUs do not change.`
      : '';
  return `${curve.gpusForWaitTarget} GPUs keep every team's p90 wait within ${target}${cost}.${note}`;
}

function jobs(count: number, capital = false): string {
  const verb = count === 1 ? 'job is' : 'jobs are';
  return `${count} ${verb}`.replace(/^./, c => (capital ? c.toUpperCase() : c));
}

export function formatCost(cost: number, currency: string | null): string {
  const amount = cost.toLocaleString('en', { maximumFractionDigits: 0 });
  return currency ? `${currency} ${amount}` : amount;
}
