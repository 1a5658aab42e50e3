/**
 * Quota from history (`GET recommendations?series=true`): the recommendation
 * table (team, resource, the quota now and recommended, its bounds, how often
 * demand exceeded the quota, how much of it sat idle, the p90 wait, and the
 * explanation in words) and a plot of a row's demand against its quota over
 * the window. Admins see every team and get **Apply** (the recommendation as
 * a `PUT profiles/{team}`, validated and audited like any profile edit); a
 * team member sees their own teams' rows and plot.
 */

import * as React from 'react';

import { IProfileClient } from '../profileeditor';
import {
  appliedProfile,
  changesQuota,
  demandPoints,
  duration,
  inUnits,
  IRecommendationClient,
  percent,
  rowKey
} from '../recommendations';
import { IProfile, IRecommendation } from '../tokens';
import { useLoad, useOnScreen } from './hooks';
import { Chart } from './LazyCharts';
import { TaskError, useTask } from './task';

const DemandChart = React.lazy(() =>
  import('./RecommendationCharts').then(m => ({ default: m.DemandChart }))
);

/** What Apply needs (admins): the stored profiles and `PUT profiles/{team}`. */
export interface IApplyOptions {
  client: Pick<IProfileClient, 'putProfile'>;
  /** The team's profile as stored (read again after every apply). */
  stored: (team: string) => IProfile | null;
  /** Called after a profile was saved (re-read the profiles and the balances). */
  onApplied: () => Promise<void> | void;
}

export interface IRecommendationsProps {
  client: IRecommendationClient;
  /** Admins: Apply on each row that changes the quota. */
  apply?: IApplyOptions;
  /** The id prefix of the section's elements (two views may show it). */
  idPrefix: string;
}

export function RecommendationsSection(
  props: IRecommendationsProps
): JSX.Element {
  const { client, apply, idPrefix } = props;
  // Read when the section first comes on screen, and again after each Apply.
  const ref = React.useRef<HTMLElement>(null);
  const onScreen = useOnScreen(ref);
  const [seen, setSeen] = React.useState(false);
  React.useEffect(() => {
    if (onScreen) {
      setSeen(true);
    }
  }, [onScreen]);
  const [version, setVersion] = React.useState(0);
  const answer = useLoad(
    () => client.recommendations(true),
    [client, version],
    seen
  );
  const rows = answer.value?.recommendations ?? [];
  const [chosen, setChosen] = React.useState('');
  const plotted =
    rows.find(r => rowKey(r) === chosen) ??
    rows.find(r => r.resource.endsWith('gpu')) ??
    rows[0];
  const [applied, setApplied] = React.useState('');
  // stored all the same: overcommitting can be deliberate (PUT's `warnings`)
  const [warnings, setWarnings] = React.useState<string[]>([]);
  const task = useTask(async (row: IRecommendation) => {
    if (!apply) {
      return;
    }
    const stored = apply.stored(row.team);
    if (!stored) {
      throw new Error(`team ${row.team} has no stored profile to edit`);
    }
    const answer = await apply.client.putProfile(
      row.team,
      appliedProfile(stored, row)
    );
    setApplied(
      `Applied: ${row.team}'s ${row.resource} is now ${row.recommended} (was ${row.current ?? 'unlimited'}).`
    );
    setWarnings(answer.warnings ?? []);
    await apply.onApplied();
    setVersion(v => v + 1);
  });
  const titleId = `${idPrefix}-title`;
  return (
    <section
      ref={ref}
      className="jp-QuotaSidebar-section jp-QuotaRecommend"
      aria-labelledby={titleId}
      aria-busy={answer.loading}
    >
      <h2 id={titleId}>Recommended quotas</h2>
      <p className="jp-QuotaSidebar-hint">
        From the last weeks of demand: what ran, waited or was refused.
      </p>
      {answer.error && (
        <p className="jp-QuotaSidebar-error" role="alert">
          Could not read the recommendations: {answer.error}
        </p>
      )}
      {!answer.value && !answer.error && (
        <p className="jp-QuotaSidebar-empty" role="status">
          Loading the recommendations…
        </p>
      )}
      {answer.value && rows.length === 0 && (
        <p className="jp-QuotaSidebar-empty">No team to recommend for.</p>
      )}
      {rows.length > 0 && (
        <div className="jp-QuotaRecommend-scroll">
          <RecommendationTable
            rows={rows}
            plotted={plotted ? rowKey(plotted) : ''}
            onPlot={row => setChosen(rowKey(row))}
            onApply={apply ? row => void task.run(row) : undefined}
            busy={task.busy}
          />
        </div>
      )}
      {applied && !task.error && (
        <p className="jp-QuotaIncrease-status" role="status">
          {applied}
        </p>
      )}
      {applied && !task.error && warnings.length > 0 && (
        <ul
          className="jp-QuotaSidebar-warnings"
          aria-label="Warnings on the applied recommendation"
        >
          {warnings.map(warning => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      )}
      <TaskError
        error={task.error}
        prefix="Could not apply the recommendation: "
      />
      {plotted && <DemandPlot row={plotted} />}
    </section>
  );
}

export interface IRecommendationTableProps {
  rows: IRecommendation[];
  /** The row the plot shows (`team/resource`). */
  plotted: string;
  onPlot: (row: IRecommendation) => void;
  /** Without it, no Apply column (a team member's view). */
  onApply?: (row: IRecommendation) => void;
  busy?: boolean;
}

export function RecommendationTable(
  props: IRecommendationTableProps
): JSX.Element {
  const { rows, onApply } = props;
  return (
    <table
      className="jp-Quota-balanceTable jp-QuotaRecommend-table"
      aria-label="Recommended hard quotas"
    >
      <thead>
        <tr>
          <th scope="col">Team</th>
          <th scope="col">Resource</th>
          <th scope="col" className="jp-Quota-quantity">
            Current
          </th>
          <th scope="col" className="jp-Quota-quantity">
            Recommended
          </th>
          <th scope="col" className="jp-Quota-quantity">
            Range
          </th>
          <th
            scope="col"
            className="jp-Quota-quantity"
            title="Share of the time demand was over the current quota"
          >
            Exceeded
          </th>
          <th
            scope="col"
            className="jp-Quota-quantity"
            title="Share of the current quota running jobs left unused"
          >
            Idle
          </th>
          <th scope="col" className="jp-Quota-quantity">
            p90 wait
          </th>
          <th scope="col">Plot</th>
          {onApply && <th scope="col">Apply</th>}
        </tr>
      </thead>
      <tbody>
        {rows.map(row => {
          const key = rowKey(row);
          return (
            <React.Fragment key={key}>
              <tr
                data-team={row.team}
                data-resource={row.resource}
                data-current={row.current ?? ''}
                data-recommended={row.recommended}
              >
                <th scope="row">{row.team}</th>
                <td>
                  <code>{row.resource}</code>
                </td>
                <td className="jp-Quota-quantity">{row.current ?? '–'}</td>
                <td className="jp-Quota-quantity">
                  <strong>{row.recommended}</strong>
                </td>
                <td className="jp-Quota-quantity">
                  {row.lower}–{row.upper}
                </td>
                <td className="jp-Quota-quantity">
                  {percent(row.exceededShare)}
                </td>
                <td className="jp-Quota-quantity">{percent(row.idleShare)}</td>
                <td className="jp-Quota-quantity">
                  {duration(row.waitP90Seconds)}
                </td>
                <td>
                  <input
                    type="radio"
                    name="jp-QuotaRecommend-plot"
                    aria-label={`Plot ${row.team}'s ${row.resource}`}
                    checked={props.plotted === key}
                    onChange={() => props.onPlot(row)}
                  />
                </td>
                {onApply && (
                  <td>
                    <button
                      type="button"
                      className="jp-mod-styled jp-QuotaButton"
                      disabled={props.busy || !changesQuota(row)}
                      title={
                        changesQuota(row)
                          ? `Set ${row.team}'s ${row.resource} to ${row.recommended} (PUT profiles/${row.team})`
                          : 'The quota is already the recommended one'
                      }
                      aria-label={`Apply ${row.recommended} to ${row.team}'s ${row.resource}`}
                      onClick={() => onApply(row)}
                    >
                      Apply
                    </button>
                  </td>
                )}
              </tr>
              <tr className="jp-QuotaRecommend-explanation">
                <td colSpan={onApply ? 10 : 9}>{row.explanation}</td>
              </tr>
            </React.Fragment>
          );
        })}
      </tbody>
    </table>
  );
}

/** A row's demand against its quota over the window (nothing without a series). */
export function DemandPlot(props: {
  row: IRecommendation;
  width?: number;
}): JSX.Element | null {
  const { row } = props;
  const series = row.series;
  if (!series) {
    return null;
  }
  const points = demandPoints(series);
  return (
    <figure
      className="jp-QuotaRecommend-plot"
      data-team={row.team}
      data-resource={row.resource}
      data-points={points.length}
      data-peak={Math.max(0, ...series.demand)}
    >
      <figcaption>
        {row.team}: demand against the quota ({series.unit},{' '}
        <code>{row.resource}</code>)
      </figcaption>
      <Chart>
        <DemandChart
          points={points}
          quota={series.quota}
          unit={series.unit}
          recommended={inUnits(row.recommended, series.unit)}
          label={`${row.team}'s demand for ${row.resource} against its quota of ${row.current ?? 'none'}, over the window`}
          width={props.width}
        />
      </Chart>
    </figure>
  );
}
