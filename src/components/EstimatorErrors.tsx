/**
 * The admin view's estimator accuracy: per model family and regime, how far
 * the estimates of finished jobs were from the peak ms-swift measured, and
 * the correction estimates now get (`GET estimator/errors`; docs/estimator.md §13).
 */

import * as React from 'react';

import { IEstimatorErrors } from '../tokens';
import { useLoad } from './hooks';
import { TaskError } from './task';

export interface IEstimatorErrorsProps {
  /** Reads the table (the REST client's `estimatorErrors`). */
  load: () => Promise<IEstimatorErrors>;
  /** The quota model's generation: the table is read again when jobs or balances change. */
  version: number;
}

export function EstimatorErrors(props: IEstimatorErrorsProps): JSX.Element {
  const table = useLoad(props.load, [props.load, props.version]);
  const rows = table.value?.rows ?? null;
  return (
    <>
      <TaskError
        error={table.error}
        prefix="Could not read the estimator's errors: "
      />
      {rows !== null && rows.length === 0 && (
        <p className="jp-QuotaSidebar-empty">
          No finished GPU job has logged its peak memory yet.
        </p>
      )}
      {rows !== null && rows.length > 0 && (
        <table
          className="jp-Quota-balanceTable jp-QuotaAdmin-errors"
          aria-label="Estimator errors by model family and regime"
        >
          <thead>
            <tr>
              <th scope="col">Family · regime</th>
              <th scope="col" className="jp-Quota-quantity">
                Jobs
              </th>
              <th scope="col" className="jp-Quota-quantity">
                Median
              </th>
              <th scope="col" className="jp-Quota-quantity">
                p90
              </th>
              <th scope="col" className="jp-Quota-quantity">
                Under &gt;10%
              </th>
              <th scope="col" className="jp-Quota-quantity">
                Correction
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map(row => (
              <tr key={`${row.family}/${row.regime}`}>
                <th scope="row">
                  {row.family === 'all'
                    ? 'All jobs'
                    : `${row.family} · ${row.regime}`}
                </th>
                <td className="jp-Quota-quantity">{row.jobs}</td>
                <td className="jp-Quota-quantity">{row.medianErrorPct}%</td>
                <td className="jp-Quota-quantity">{row.p90ErrorPct}%</td>
                <td className="jp-Quota-quantity">
                  {Math.round(row.underPredictedOver10Pct * 100)}%
                </td>
                <td
                  className="jp-Quota-quantity"
                  title={
                    row.correction?.note ??
                    'none: fewer than 3 jobs, or none needed'
                  }
                >
                  {row.correction ? `×${row.correction.factor}` : '—'}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <button
        type="button"
        className="jp-mod-styled jp-QuotaButton"
        disabled={table.loading}
        onClick={table.retry}
      >
        Read again
      </button>
    </>
  );
}
