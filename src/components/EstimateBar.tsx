/**
 * An estimate as a stacked bar of its breakdown (weights, gradients,
 * optimizer, activations, logits, vision, parallel, buckets, evaluation,
 * allocator, overhead) against one GPU's memory, with the range measured
 * peaks of its regime fell in (docs/estimator.md §9.1) as a band over it.
 */

import * as React from 'react';

import { formatGiB } from '../quantity';
import { IBreakdown, IEstimate } from '../tokens';

export interface IEstimateBarProps {
  estimate: IEstimate;
  /** One GPU's memory in bytes, or null when unknown (the bar is then the peak). */
  gpuMemory: number | null;
  label: string;
}

const PARTS: (keyof IBreakdown)[] = [
  'weights',
  'gradients',
  'optimizer',
  'activations',
  'logits',
  'vision',
  'parallel',
  'buckets',
  'evaluation',
  'allocator',
  'overhead'
];

export function EstimateBar(props: IEstimateBarProps): JSX.Element {
  const { estimate, gpuMemory, label } = props;
  const peak = estimate.peakBytesPerGpu;
  const [low, high] = estimate.rangeBytesPerGpu ?? [peak, peak];
  const scale = Math.max(gpuMemory ?? high, high, peak, 1);
  const fits = gpuMemory === null || peak <= gpuMemory;
  // the estimate fits but the range's upper end does not: what plans are fitted to by default
  const risky = fits && gpuMemory !== null && high > gpuMemory;
  const parts = PARTS.filter(p => (estimate.breakdown?.[p] ?? 0) > 0);
  const range = estimate.rangeBytesPerGpu
    ? `range ${formatGiB(low)}–${formatGiB(high)}` +
      (estimate.approximate ? ', approximate model' : '')
    : '';
  const summary =
    `${label}: ${formatGiB(peak)} per GPU` +
    (range ? ` (${range})` : '') +
    (gpuMemory ? ` of ${formatGiB(gpuMemory)}` : '') +
    (fits ? '' : ', does not fit') +
    (risky ? ', the upper end does not fit' : '') +
    '. ' +
    parts.map(p => `${p} ${formatGiB(estimate.breakdown[p])}`).join(', ');
  return (
    <figure
      className={`jp-QuotaEstimate${fits ? '' : ' jp-mod-over'}`}
      data-peak={peak}
      data-range={estimate.rangeBytesPerGpu ? `${low}-${high}` : undefined}
    >
      <figcaption>
        <strong>{formatGiB(peak)}</strong> per GPU
        {gpuMemory !== null && <> of {formatGiB(gpuMemory)}</>}
        {range && (
          <span
            className="jp-QuotaEstimate-range"
            title={`Measured peaks of regime ${estimate.regime ?? '?'} fell in this range around their estimates`}
          >
            {' '}
            · {range}
          </span>
        )}
        {!fits && (
          <span className="jp-QuotaEstimate-over"> · does not fit</span>
        )}
        {risky && (
          <span className="jp-QuotaEstimate-over">
            {' '}
            · the upper end does not fit
          </span>
        )}
      </figcaption>
      <div className="jp-QuotaEstimate-track" role="img" aria-label={summary}>
        {parts.map(p => (
          <div
            key={p}
            className={`jp-QuotaEstimate-part jp-mod-${p}`}
            style={{ width: `${(100 * estimate.breakdown[p]) / scale}%` }}
            title={`${p}: ${formatGiB(estimate.breakdown[p])}`}
          />
        ))}
        {estimate.rangeBytesPerGpu && (
          <div
            className="jp-QuotaEstimate-band"
            style={{
              left: `${(100 * low) / scale}%`,
              width: `${(100 * (high - low)) / scale}%`
            }}
            title={range}
          />
        )}
        {gpuMemory !== null && (!fits || risky) && (
          <div
            className="jp-QuotaEstimate-limit"
            style={{ left: `${(100 * gpuMemory) / scale}%` }}
            title={`GPU memory: ${formatGiB(gpuMemory)}`}
          />
        )}
      </div>
      <ul className="jp-QuotaEstimate-legend">
        {parts.map(p => (
          <li key={p}>
            <span
              className={`jp-QuotaEstimate-swatch jp-mod-${p}`}
              aria-hidden="true"
            />
            {p} {formatGiB(estimate.breakdown[p])}
          </li>
        ))}
      </ul>
    </figure>
  );
}
