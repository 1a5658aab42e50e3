/**
 * A table of hours per resource and cost, one row per team or user: the admin
 * view's usage rankings and the chargeback share it.
 */

import * as React from 'react';

import { formatHours, IUsageTotal } from '../usage';

export interface IHoursTableProps {
  rows: IUsageTotal[];
  /** The accessible name of the table. */
  label: string;
  /** The heading of the first column (`Namespace`, `User`). */
  keyTitle: string;
  /** The heading of the cost column; no cost column without it. */
  costTitle?: string;
  /** A totals row, in the table's foot. */
  total?: IUsageTotal;
  empty: string;
  className?: string;
}

export function HoursTable(props: IHoursTableProps): JSX.Element {
  const { rows, costTitle } = props;
  return (
    <table
      className={`jp-Quota-balanceTable jp-QuotaUsage-table ${props.className ?? ''}`}
      aria-label={props.label}
    >
      <thead>
        <tr>
          <th scope="col">{props.keyTitle}</th>
          <th scope="col" className="jp-Quota-quantity">
            GPU-h
          </th>
          <th scope="col" className="jp-Quota-quantity">
            CPU-h
          </th>
          <th scope="col" className="jp-Quota-quantity">
            GiB-h
          </th>
          {costTitle && (
            <th scope="col" className="jp-Quota-quantity">
              {costTitle}
            </th>
          )}
        </tr>
      </thead>
      <tbody>
        {rows.length === 0 ? (
          <tr>
            <td colSpan={costTitle ? 5 : 4} className="jp-QuotaSidebar-empty">
              {props.empty}
            </td>
          </tr>
        ) : (
          rows.map(row => (
            <HoursRow key={row.key} row={row} cost={!!costTitle} />
          ))
        )}
      </tbody>
      {props.total && (
        <tfoot>
          <HoursRow row={props.total} cost={!!costTitle} />
        </tfoot>
      )}
    </table>
  );
}

function HoursRow(props: { row: IUsageTotal; cost: boolean }): JSX.Element {
  const { row } = props;
  return (
    <tr
      data-key={row.key}
      data-gpu-hours={row.gpuHours}
      data-cost={row.cost ?? ''}
    >
      <th scope="row" title={row.detail}>
        {row.key}
      </th>
      <td className="jp-Quota-quantity">{formatHours(row.gpuHours)}</td>
      <td className="jp-Quota-quantity">{formatHours(row.cpuHours)}</td>
      <td className="jp-Quota-quantity">{formatHours(row.memoryGibHours)}</td>
      {props.cost && (
        <td className="jp-Quota-quantity">
          {row.cost === null ? '–' : row.cost.toFixed(2)}
        </td>
      )}
    </tr>
  );
}
