/**
 * A table of hours and cost, one row per team or user, with the columns the
 * caller picks: the admin view's rankings (the chosen resource and the cost)
 * and the chargeback (every resource and the cost) share it. It scrolls
 * sideways inside a narrow side panel.
 */

import * as React from 'react';

import { formatHours, IUsageTotal } from '../usage';

/** A column: its heading and its figure for a row (null shows as a dash). */
export interface IHoursColumn {
  title: string;
  value: (row: IUsageTotal) => number | null;
  /** Money: two decimals rather than hours' rounding. */
  money?: boolean;
}

/** The hours of each resource. */
export const RESOURCE_COLUMNS: IHoursColumn[] = [
  { title: 'GPU-h', value: row => row.gpuHours },
  { title: 'CPU-h', value: row => row.cpuHours },
  { title: 'GiB-h', value: row => row.memoryGibHours }
];

/** The cost column, headed with the currency. */
export function costColumn(title: string): IHoursColumn {
  return { title, value: row => row.cost, money: true };
}

export interface IHoursTableProps {
  rows: IUsageTotal[];
  columns: IHoursColumn[];
  /** The accessible name of the table. */
  label: string;
  /** The heading of the first column (`Namespace`, `User`). */
  keyTitle: string;
  /** A totals row, in the table's foot. */
  total?: IUsageTotal;
  empty: string;
  className?: string;
}

export function HoursTable(props: IHoursTableProps): JSX.Element {
  const { rows, columns } = props;
  return (
    <div
      className="jp-QuotaUsage-scroll"
      role="region"
      aria-label={props.label}
      tabIndex={0}
    >
      <table
        className={`jp-Quota-balanceTable jp-QuotaUsage-table ${props.className ?? ''}`}
        aria-label={props.label}
      >
        <thead>
          <tr>
            <th scope="col">{props.keyTitle}</th>
            {columns.map(column => (
              <th key={column.title} scope="col" className="jp-Quota-quantity">
                {column.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td
                colSpan={columns.length + 1}
                className="jp-QuotaSidebar-empty"
              >
                {props.empty}
              </td>
            </tr>
          ) : (
            rows.map(row => (
              <HoursRow key={row.key} row={row} columns={columns} />
            ))
          )}
        </tbody>
        {props.total && (
          <tfoot>
            <HoursRow row={props.total} columns={columns} />
          </tfoot>
        )}
      </table>
    </div>
  );
}

function HoursRow(props: {
  row: IUsageTotal;
  columns: IHoursColumn[];
}): JSX.Element {
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
      {props.columns.map(column => {
        const value = column.value(row);
        return (
          <td key={column.title} className="jp-Quota-quantity">
            {value === null
              ? '–'
              : column.money
                ? value.toFixed(2)
                : formatHours(value)}
          </td>
        );
      })}
    </tr>
  );
}
