/**
 * The admin view's estimator accuracy: per model family and regime, how far
 * the estimates of finished jobs were from the peak ms-swift measured, and
 * the correction estimates now get (`GET estimator/errors`; docs/estimator.md §13).
 */

import * as React from 'react';

import { asModelError } from '../model';
import { IEstimatorErrors } from '../tokens';

export interface IEstimatorErrorsProps {
  /** Reads the table (the REST client's `estimatorErrors`). */
  load: () => Promise<IEstimatorErrors>;
  /** The quota model's generation: the table is read again when jobs or balances change. */
  version: number;
}

type Row = IEstimatorErrors['rows'][number];

export function EstimatorErrors(props: IEstimatorErrorsProps): JSX.Element {
  const [rows, setRows] = React.useState<Row[] | null>(null);
  const [error, setError] = React.useState('');
  const load = React.useCallback(async () => {
    setError('');
    try {
      setRows((await props.load()).rows);
    } catch (e) {
      setError(asModelError(e).message);
    }
  }, [props.load]);
  React.useEffect(() => {
    void load();
  }, [load, props.version]);

  return (
    <>
      {error && (
        <p className="jp-QuotaSidebar-error" role="alert">
          Could not read the estimator's errors: {error}
        </p>
      )}
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
        onClick={() => void load()}
      >
        Read again
      </button>
    </>
  );
}
