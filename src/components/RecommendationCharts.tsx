/**
 * The quota-from-history charts, drawn by Recharts as the usage charts are
 * (`charts.tsx`; theme colours, no animation): a row's demand against its
 * quota over time, and the capacity curve (the worst team's p90 wait at each
 * cluster size). Loaded on first use only, as a chunk of its own.
 */

import * as React from 'react';
import {
  Area,
  CartesianGrid,
  ComposedChart,
  Legend,
  Line,
  ReferenceLine,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis
} from 'recharts';

import { ICapacityPoint, IDemandPoint } from '../recommendations';
import { THEMED_AXIS } from './charts';

const CHART_HEIGHT = 170;

export interface IDemandChartProps {
  points: IDemandPoint[];
  /** The quota now, in `unit` (no line without one). */
  quota: number | null;
  unit: string;
  /** The recommended quota, in `unit`, as a dashed line. */
  recommended: number | null;
  label: string;
  /** A fixed width in pixels (tests); the container's width otherwise. */
  width?: number;
}

export function DemandChart(props: IDemandChartProps): JSX.Element {
  const { points, quota, recommended, unit } = props;
  const chart = (
    <ComposedChart
      data={points}
      width={props.width}
      height={props.width ? CHART_HEIGHT : undefined}
      margin={{ top: 8, right: 8, bottom: 0, left: 0 }}
    >
      <CartesianGrid vertical={false} strokeDasharray="2 3" />
      <XAxis
        {...THEMED_AXIS}
        dataKey="start"
        type="number"
        scale="time"
        domain={['dataMin', 'dataMax']}
        tickFormatter={day}
        minTickGap={24}
        tickLine={false}
      />
      <YAxis
        {...THEMED_AXIS}
        width={36}
        allowDecimals={false}
        domain={[
          0,
          (max: number) => Math.max(max, quota ?? 0, recommended ?? 0)
        ]}
        tickLine={false}
      />
      <Tooltip
        labelFormatter={start => new Date(Number(start)).toLocaleString()}
        formatter={(value, name) => [`${value} ${unit}`, name]}
        wrapperClassName="jp-QuotaUsage-tooltip"
      />
      <Legend iconSize={8} />
      <Area
        dataKey="held"
        name="Running"
        type="stepAfter"
        stroke="none"
        fill="var(--jp-brand-color3)"
        fillOpacity={0.8}
        isAnimationActive={false}
      />
      <Line
        dataKey="demand"
        name="Demand (peak)"
        type="stepAfter"
        dot={false}
        stroke="var(--jp-brand-color1)"
        isAnimationActive={false}
      />

      {quota !== null && (
        <ReferenceLine
          y={quota}
          stroke="var(--jp-error-color1)"
          strokeWidth={2}
          label={{
            value: `quota ${quota}`,
            position: 'insideTopLeft',
            fill: 'var(--jp-ui-font-color1)'
          }}
        />
      )}
      {recommended !== null && (
        <ReferenceLine
          y={recommended}
          stroke="var(--jp-success-color1)"
          strokeDasharray="4 3"
          label={{
            value: `recommended ${recommended}`,
            position: 'insideTopRight',
            fill: 'var(--jp-ui-font-color1)'
          }}
        />
      )}
    </ComposedChart>
  );
  return (
    <ChartBox className="jp-QuotaRecommend-demandChart" {...props}>
      {chart}
    </ChartBox>
  );
}

export interface ICapacityChartProps {
  points: ICapacityPoint[];
  /** The wait target in hours, as a line. */
  targetHours: number;
  label: string;
  width?: number;
}

export function CapacityChart(props: ICapacityChartProps): JSX.Element {
  const chart = (
    <ComposedChart
      data={props.points}
      width={props.width}
      height={props.width ? CHART_HEIGHT : undefined}
      margin={{ top: 8, right: 8, bottom: 14, left: 0 }}
    >
      <CartesianGrid strokeDasharray="2 3" />
      <XAxis
        {...THEMED_AXIS}
        dataKey="gpus"
        type="number"
        domain={['dataMin', 'dataMax']}
        allowDecimals={false}
        tickLine={false}
        label={{
          value: 'GPUs',
          position: 'insideBottomRight',
          offset: -12,
          fill: 'var(--jp-ui-font-color2)'
        }}
      />
      <YAxis {...THEMED_AXIS} width={36} tickLine={false} unit=" h" />
      <Tooltip
        labelFormatter={gpus => `${gpus} GPUs`}
        formatter={value => [`${value} h`, 'worst p90 wait']}
        wrapperClassName="jp-QuotaUsage-tooltip"
      />
      <Line
        dataKey="waitHours"
        name="Worst team's p90 wait"
        stroke="var(--jp-brand-color1)"
        isAnimationActive={false}
      />
      <ReferenceLine
        y={props.targetHours}
        stroke="var(--jp-error-color1)"
        strokeDasharray="4 3"
        label={{
          value: `target ${props.targetHours} h`,
          position: 'insideTopRight',
          fill: 'var(--jp-ui-font-color1)'
        }}
      />
    </ComposedChart>
  );
  return (
    <ChartBox className="jp-QuotaRecommend-capacityChart" {...props}>
      {chart}
    </ChartBox>
  );
}

/** A chart as an image for assistive technology, of a fixed width or its container's. */
function ChartBox(props: {
  className: string;
  label: string;
  width?: number;
  children: React.ReactElement;
}): JSX.Element {
  return (
    <div
      className={`jp-QuotaUsage-chart ${props.className}`}
      role="img"
      aria-label={props.label}
    >
      {props.width ? (
        props.children
      ) : (
        <ResponsiveContainer width="100%" height={CHART_HEIGHT}>
          {props.children}
        </ResponsiveContainer>
      )}
    </div>
  );
}

function day(start: number): string {
  return new Date(start).toLocaleDateString([], {
    month: 'short',
    day: 'numeric'
  });
}
