/**
 * The charts (`charts.tsx`, with Recharts) in a chunk of their own, fetched
 * when a panel first shows a chart, so that JupyterLab's start does not load
 * them for users who never open the quota panels.
 */

import * as React from 'react';

export const UsageChart = React.lazy(() =>
  import('./charts').then(module => ({ default: module.UsageChart }))
);

export const TeamChart = React.lazy(() =>
  import('./charts').then(module => ({ default: module.TeamChart }))
);

/** Where a chart goes: a placeholder of the chart's height while its code loads. */
export function Chart(props: { children: React.ReactNode }): JSX.Element {
  return (
    <React.Suspense
      fallback={
        <p className="jp-QuotaUsage-chartLoading" role="status">
          Loading the chart…
        </p>
      }
    >
      {props.children}
    </React.Suspense>
  );
}
