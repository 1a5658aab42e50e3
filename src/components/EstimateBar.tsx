/**
 * An estimate as a stacked bar of its breakdown (weights, gradients,
 * optimizer, activations, logits, overhead) against one GPU's memory.
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
  'overhead'
];

export function EstimateBar(props: IEstimateBarProps): JSX.Element {
  const { estimate, gpuMemory, label } = props;
  const peak = estimate.peakBytesPerGpu;
  const scale = Math.max(gpuMemory ?? peak, peak, 1);
  const fits = gpuMemory === null || peak <= gpuMemory;
  const parts = PARTS.filter(p => (estimate.breakdown?.[p] ?? 0) > 0);
  const summary =
    `${label}: ${formatGiB(peak)} per GPU` +
    (gpuMemory ? ` of ${formatGiB(gpuMemory)}` : '') +
    (fits ? '' : ', does not fit') +
    '. ' +
    parts.map(p => `${p} ${formatGiB(estimate.breakdown[p])}`).join(', ');
  return (
    <figure
      className={`jp-QuotaEstimate${fits ? '' : ' jp-mod-over'}`}
      data-peak={peak}
    >
      <figcaption>
        <strong>{formatGiB(peak)}</strong> per GPU
        {gpuMemory !== null && <> of {formatGiB(gpuMemory)}</>}
        {!fits && (
          <span className="jp-QuotaEstimate-over"> · does not fit</span>
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
        {gpuMemory !== null && !fits && (
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
