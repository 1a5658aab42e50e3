/**
 * The sidebar's usage: for each of the user's namespaces, a chart of the
 * last 24 hours or 7 days (the user's own hours and everyone else's) and the
 * user's share, from `GET usage?by=user&step=…&namespace=…`; the figures also
 * as a table for keyboard and screen-reader users.
 */

import * as React from 'react';

import { QuotaModel } from '../model';
import {
  formatHours,
  IUsageClient,
  IUsagePoint,
  IUsageRange,
  shareText,
  usageQuery,
  usageSeries,
  usageShare,
  UsageResource
} from '../usage';
import { useLoad, useOnScreen, useTick } from './hooks';
import { Chart, UsageChart } from './LazyCharts';
import { unitOf, UsageControls, useUsageControls } from './UsageControls';

/** Milliseconds between two reads of a chart's usage (the sums move slowly). */
const USAGE_REFRESH = 60 * 1000;

export interface IUsageSectionProps {
  model: QuotaModel;
  client: IUsageClient;
}

export function UsageSection(props: IUsageSectionProps): JSX.Element {
  const { model, client } = props;
  const controls = useUsageControls();
  const user = model.identity?.name ?? '';
  return (
    <section
      className="jp-QuotaSidebar-section"
      aria-labelledby="jp-QuotaSidebar-usageTitle"
    >
      <h2 id="jp-QuotaSidebar-usageTitle">Usage</h2>
      <UsageControls
        idPrefix="jp-QuotaSidebar-usage"
        range={controls.range}
        resource={controls.resource}
        onRange={controls.setRange}
        onResource={controls.setResource}
      />
      {model.namespaces.map(ns => (
        <NamespaceUsage
          key={ns.name}
          client={client}
          namespace={ns.name}
          user={user}
          range={controls.range}
          resource={controls.resource}
        />
      ))}
    </section>
  );
}

function NamespaceUsage(props: {
  client: IUsageClient;
  namespace: string;
  user: string;
  range: IUsageRange;
  resource: UsageResource;
}): JSX.Element {
  const { client, namespace, user, range, resource } = props;
  // Read only while the chart is on screen (not for a closed panel), every minute.
  const ref = React.useRef<HTMLElement>(null);
  const onScreen = useOnScreen(ref);
  const tick = useTick(USAGE_REFRESH, onScreen);
  const { value, error, loading } = useLoad(
    () => client.usage(usageQuery(range, Date.now(), 'user', { namespace })),
    [client, namespace, range, tick],
    onScreen
  );
  const unit = unitOf(resource);
  const headingId = `jp-QuotaUsage-${namespace}`;
  const share = value ? usageShare(value.rows, resource, user) : null;
  const points = value ? usageSeries(value, resource, user) : [];
  return (
    <section
      ref={ref}
      className="jp-QuotaUsage"
      aria-labelledby={headingId}
      aria-busy={loading}
      data-namespace={namespace}
      data-range={range.id}
    >
      <h3 id={headingId}>
        {namespace}
        <span className="jp-QuotaSidebar-hint"> · last {range.label}</span>
      </h3>
      {error && (
        <p className="jp-QuotaSidebar-error" role="alert">
          Could not read the usage: {error}
        </p>
      )}
      {share && (
        <p
          className="jp-QuotaUsage-share"
          data-mine={share.mine}
          data-total={share.total}
        >
          {shareText(share, unit)}
        </p>
      )}
      {value ? (
        <>
          <Chart>
            <UsageChart
              points={points}
              range={range}
              unit={unit}
              label={`${unit} used in ${namespace} over the last ${range.label}, yours and others'`}
            />
          </Chart>
          <PointsTable points={points} unit={unit} namespace={namespace} />
        </>
      ) : (
        !error && (
          <p className="jp-QuotaSidebar-empty" role="status">
            Loading the usage…
          </p>
        )
      )}
    </section>
  );
}

/** The chart's figures as a table, folded away under "Figures". */
function PointsTable(props: {
  points: IUsagePoint[];
  unit: string;
  namespace: string;
}): JSX.Element {
  const { points, unit } = props;
  return (
    <details className="jp-QuotaUsage-figures">
      <summary>Figures</summary>
      <table
        className="jp-Quota-balanceTable jp-QuotaUsage-table"
        aria-label={`${unit} in ${props.namespace} per period`}
      >
        <thead>
          <tr>
            <th scope="col">From</th>
            <th scope="col" className="jp-Quota-quantity">
              You
            </th>
            <th scope="col" className="jp-Quota-quantity">
              Others
            </th>
          </tr>
        </thead>
        <tbody>
          {points.map(p => (
            <tr
              key={p.start}
              data-start={new Date(p.start).toISOString()}
              data-mine={p.mine}
              data-others={p.others}
            >
              <th scope="row">
                {new Date(p.start).toLocaleString([], {
                  weekday: 'short',
                  hour: '2-digit',
                  minute: '2-digit'
                })}
              </th>
              <td className="jp-Quota-quantity">{formatHours(p.mine)}</td>
              <td className="jp-Quota-quantity">{formatHours(p.others)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}
