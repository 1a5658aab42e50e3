/**
 * The admin view's usage: every team's hours over the last 24 hours or 7
 * days (chart and table, from `GET usage?by=team`), the top holders (from
 * `by=user`).
 */

import * as React from 'react';

import { QuotaModel } from '../model';
import {
  IUsageClient,
  IUsageTotal,
  usageQuery,
  usageTotals,
  UsageResource
} from '../usage';
import { useLoad, useOnScreen, useTick } from './hooks';
import { costColumn, HoursTable, IHoursColumn } from './HoursTable';
import { Chart, TeamChart } from './LazyCharts';
import { unitOf, UsageControls, useUsageControls } from './UsageControls';

/** How many users the top holders list shows. */
const TOP_HOLDERS = 5;
/** How many teams the chart draws (the table lists them all). */
const CHART_TEAMS = 10;
const USAGE_REFRESH = 60 * 1000;

const HOURS_OF: { [R in UsageResource]: keyof IUsageTotal } = {
  gpuSeconds: 'gpuHours',
  cpuSeconds: 'cpuHours',
  memoryGibSeconds: 'memoryGibHours'
};

export function AdminUsage(props: {
  model: QuotaModel;
  client: IUsageClient;
}): JSX.Element {
  const { client } = props;
  const controls = useUsageControls();
  const { range, resource } = controls;
  // Read only while the section is on screen (not for a closed panel), every minute.
  const ref = React.useRef<HTMLElement>(null);
  const onScreen = useOnScreen(ref);
  const tick = useTick(USAGE_REFRESH, onScreen);
  const teams = useLoad(
    () => client.usage(usageQuery(range, Date.now(), 'team', { totals: true })),
    [client, range, tick],
    onScreen
  );
  const users = useLoad(
    () => client.usage(usageQuery(range, Date.now(), 'user', { totals: true })),
    [client, range, tick],
    onScreen
  );
  const unit = unitOf(resource);
  const field = HOURS_OF[resource];
  const byTeam = teams.value ? usageTotals(teams.value.rows, 'namespace') : [];
  const byUser = users.value ? usageTotals(users.value.rows, 'user') : [];
  const rank = (a: IUsageTotal, b: IUsageTotal) =>
    (b[field] as number) - (a[field] as number) || a.key.localeCompare(b.key);
  return (
    <>
      <section
        ref={ref}
        className="jp-QuotaSidebar-section jp-QuotaAdmin-usage"
        aria-labelledby="jp-QuotaAdmin-usageTitle"
        aria-busy={teams.loading}
        data-range={range.id}
        data-since={teams.value?.since}
        data-until={teams.value?.until}
      >
        <h2 id="jp-QuotaAdmin-usageTitle">Usage by team</h2>
        <UsageControls
          idPrefix="jp-QuotaAdmin-usage"
          range={range}
          resource={resource}
          onRange={controls.setRange}
          onResource={controls.setResource}
        />
        {teams.error && (
          <p className="jp-QuotaSidebar-error" role="alert">
            Could not read the usage: {teams.error}
          </p>
        )}
        {teams.value && (
          <>
            <Chart>
              <TeamChart
                teams={[...byTeam].sort(rank).slice(0, CHART_TEAMS)}
                field={field}
                unit={unit}
                label={`${unit} per team over the last ${range.label}`}
              />
            </Chart>
            <HoursTable
              rows={[...byTeam].sort(rank)}
              label={`Usage per team over the last ${range.label}`}
              keyTitle="Namespace"
              columns={rankingColumns(unit, field, teams.value.prices)}
              empty="Nothing used in this range."
            />
          </>
        )}
      </section>
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-holdersTitle"
      >
        <h2 id="jp-QuotaAdmin-holdersTitle">
          Top holders
          <span className="jp-QuotaSidebar-hint">
            {' '}
            · {unit}, last {range.label}
          </span>
        </h2>
        {users.error && (
          <p className="jp-QuotaSidebar-error" role="alert">
            Could not read the usage: {users.error}
          </p>
        )}
        {users.value && (
          <HoursTable
            rows={[...byUser].sort(rank).slice(0, TOP_HOLDERS)}
            label={`Top ${TOP_HOLDERS} users by ${unit}`}
            keyTitle="User"
            columns={rankingColumns(unit, field, users.value.prices)}
            empty="Nothing used in this range."
            className="jp-QuotaAdmin-holders"
          />
        )}
      </section>
    </>
  );
}

/** A ranking's columns: the chosen resource's hours, and the cost when prices are set. */
function rankingColumns(
  unit: string,
  field: keyof IUsageTotal,
  prices: { currency: string } | null
): IHoursColumn[] {
  const hours: IHoursColumn = {
    title: unit,
    value: row => row[field] as number
  };
  return prices ? [hours, costColumn(prices.currency)] : [hours];
}
