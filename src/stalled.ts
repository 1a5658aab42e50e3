/**
 * Zombie jobs in plain words: a running job the service flags `stalled` (no
 * log progress, or low GPU utilisation, for a while; see CONTRACTS of issue
 * 12). The flag only informs: nothing here cancels a job. Pure, no DOM.
 */

import { ageSeconds, formatAge } from './quantity';
import { IJob, IStalled } from './tokens';

/** The job's stalled flag, or null when it has none. */
export function stalledOf(job: IJob): IStalled | null {
  // `stalled` joins the Job schema with the metrics routes; read it where it is.
  const stalled = (job as IJob & { stalled?: IStalled | null }).stalled;
  return stalled && typeof stalled.reason === 'string' ? stalled : null;
}

/** Stall reasons the service uses, said plainly. */
const STALL_REASONS: { [reason: string]: string } = {
  NoLogProgress: 'no log progress',
  LowGpuUtilization: 'GPU utilisation low'
};

/** `Stalled 25 min: no log progress`, with how long since the flag's `since`. */
export function stalledText(stalled: IStalled, now: number): string {
  const what = STALL_REASONS[stalled.reason] ?? stalled.reason;
  return `Stalled ${formatAge(ageSeconds(stalled.since, now))}: ${what}`;
}

/** Every flagged job of `jobs`, the longest stalled first. */
export function stalledJobs(jobs: IJob[]): IJob[] {
  return jobs
    .filter(job => stalledOf(job) !== null)
    .sort(
      (a, b) =>
        Date.parse(stalledOf(a)!.since) - Date.parse(stalledOf(b)!.since) ||
        a.name.localeCompare(b.name)
    );
}
