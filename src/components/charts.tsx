/**
 * The usage charts, drawn by Recharts (the library jupyterlab-nvdashboard's
 * React rewrite uses): a namespace's hours per time bucket (the caller's and
 * everyone else's, stacked) and every team's hours as horizontal bars.
 * Colours are JupyterLab theme variables, so the light and dark themes both
 * apply. Loaded on first use only (`LazyCharts.tsx`): Recharts is most of the
 * extension's size.
 */

import * as React from 'react';
import {
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis
} from 'recharts';

import {
  axisTicks,
  formatHours,
  IUsagePoint,
  IUsageRange,
  IUsageTotal
} from '../usage';

/**
 * Theme colours for an axis: Recharts writes its grey into each tick's inline
 * style, which a stylesheet cannot override, so the colours go in as props.
 */
export const THEMED_AXIS = {
  stroke: 'var(--jp-border-color2)',
  tick: { fill: 'var(--jp-ui-font-color2)' }
};

export interface IUsageChartProps {
  points: IUsagePoint[];
  range: IUsageRange;
  /** The unit of the bars' values (`GPU-hours`). */
  unit: string;
  /** What the chart shows, for assistive technology. */
  label: string;
}

export function UsageChart(props: IUsageChartProps): JSX.Element {
  const { points, range, unit } = props;
  const tick = (start: number) => tickLabel(start, range);
  const hours = axisTicks(Math.max(0, ...points.map(p => p.mine + p.others)));
  return (
    <div className="jp-QuotaUsage-chart" role="img" aria-label={props.label}>
      <ResponsiveContainer width="100%" height={150}>
        <BarChart
          data={points}
          margin={{ top: 4, right: 4, bottom: 0, left: 0 }}
          barCategoryGap={1}
        >
          <CartesianGrid vertical={false} strokeDasharray="2 3" />
          <XAxis
            {...THEMED_AXIS}
            dataKey="start"
            tickFormatter={tick}
            minTickGap={16}
            tickLine={false}
          />
          <YAxis
            {...THEMED_AXIS}
            width={40}
            ticks={hours.ticks}
            domain={[0, hours.ticks[hours.ticks.length - 1]]}
            interval={0}
            tickFormatter={hours.label}
            tickLine={false}
          />
          <Tooltip
            labelFormatter={start => tooltipLabel(Number(start), range)}
            formatter={value => [`${formatHours(Number(value))} ${unit}`]}
            cursor={{ fill: 'var(--jp-layout-color3)', opacity: 0.4 }}
            wrapperClassName="jp-QuotaUsage-tooltip"
          />
          <Legend iconSize={8} />
          <Bar
            dataKey="mine"
            name="You"
            stackId="usage"
            fill="var(--jp-brand-color1)"
            isAnimationActive={false}
          />
          <Bar
            dataKey="others"
            name="Others"
            stackId="usage"
            fill="var(--jp-ui-font-color3)"
            isAnimationActive={false}
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}

/** The teams' hours as horizontal bars, heaviest on top. */
export function TeamChart(props: {
  teams: IUsageTotal[];
  field: keyof IUsageTotal;
  unit: string;
  label: string;
}): JSX.Element {
  const { teams, field, unit } = props;
  const hours = axisTicks(Math.max(0, ...teams.map(t => Number(t[field]))));
  return (
    <div className="jp-QuotaUsage-chart" role="img" aria-label={props.label}>
      <ResponsiveContainer width="100%" height={40 + 22 * teams.length}>
        <BarChart
          data={teams}
          layout="vertical"
          margin={{ top: 4, right: 8, bottom: 0, left: 0 }}
        >
          <CartesianGrid horizontal={false} strokeDasharray="2 3" />
          <XAxis
            {...THEMED_AXIS}
            type="number"
            ticks={hours.ticks}
            domain={[0, hours.ticks[hours.ticks.length - 1]]}
            interval={0}
            tickFormatter={hours.label}
            tickLine={false}
          />
          <YAxis
            {...THEMED_AXIS}
            type="category"
            dataKey="key"
            width={90}
            tickLine={false}
          />
          <Tooltip
            formatter={value => [`${formatHours(Number(value))} ${unit}`]}
            cursor={{ fill: 'var(--jp-layout-color3)', opacity: 0.4 }}
            wrapperClassName="jp-QuotaUsage-tooltip"
          />
          <Bar
            dataKey={field}
            name={unit}
            fill="var(--jp-brand-color1)"
            isAnimationActive={false}
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}

/** An axis tick: the hour for hourly buckets, the weekday and hour otherwise (local time). */
function tickLabel(start: number, range: IUsageRange): string {
  const date = new Date(start);
  if (range.step < 86400 && range.seconds <= 86400) {
    return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  }
  return date.toLocaleDateString([], { weekday: 'short' });
}

function tooltipLabel(start: number, range: IUsageRange): string {
  const from = new Date(start);
  const to = new Date(start + range.step * 1000);
  const day = from.toLocaleDateString([], { month: 'short', day: 'numeric' });
  const time = (d: Date) =>
    d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return `${day} ${time(from)}–${time(to)}`;
}
