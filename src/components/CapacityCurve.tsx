/**
 * The capacity curve (admins): the recorded jobs replayed at several cluster
 * sizes under the profiles as stored (`POST replay`, bounded work: one at a
 * time, 429 while another runs), as a chart of the worst team's p90 wait per
 * GPU count, the answer in words, and the figures as a table. It runs when
 * the admin asks: a replay is seconds of the server's CPU, not a poll.
 */

import * as React from 'react';

import {
  capacityLine,
  capacityPoints,
  duration,
  formatCost,
  IReplayClient
} from '../recommendations';
import { IProfile, IReplay } from '../tokens';
import { Chart } from './LazyCharts';
import { TaskError, useTask } from './task';

const CapacityChart = React.lazy(() =>
  import('./RecommendationCharts').then(m => ({ default: m.CapacityChart }))
);

export interface ICapacityCurveProps {
  client: IReplayClient;
  /** The profiles as stored: what the replay runs under. */
  profiles: () => IProfile[];
  /** A fixed chart width in pixels (tests). */
  width?: number;
}

export function CapacityCurve(props: ICapacityCurveProps): JSX.Element {
  const { client } = props;
  const [answer, setAnswer] = React.useState<IReplay | null>(null);
  const task = useTask(async () => {
    setAnswer(await client.replay({ profiles: props.profiles(), curve: true }));
  });
  const curve = answer?.curve;
  return (
    <section
      className="jp-QuotaSidebar-section jp-QuotaRecommend-capacity"
      aria-labelledby="jp-QuotaAdmin-capacityTitle"
      aria-busy={task.busy}
    >
      <h2 id="jp-QuotaAdmin-capacityTitle">Capacity</h2>
      <p className="jp-QuotaSidebar-hint">
        The recorded jobs replayed under today&apos;s profiles at several
        cluster sizes: how many GPUs keep every team&apos;s p90 wait within an
        hour, and what adding GPUs buys.
      </p>
      <button
        type="button"
        className="jp-mod-styled jp-QuotaButton"
        disabled={task.busy}
        onClick={() => void task.run()}
      >
        {task.busy
          ? 'Replaying…'
          : answer
            ? 'Replay again'
            : 'Replay at several sizes'}
      </button>
      <TaskError
        error={task.error}
        prefix="Could not replay: "
        onRetry={() => void task.retry()}
        retryLabel="Replay again"
      />
      {curve && (
        <>
          <p
            className="jp-QuotaRecommend-capacityLine"
            data-gpus={curve.gpusForWaitTarget ?? ''}
          >
            {capacityLine(curve)}
          </p>
          <Chart>
            <CapacityChart
              points={capacityPoints(curve)}
              targetHours={curve.waitTargetSeconds / 3600}
              label={`The worst team's p90 wait at each cluster size; the target is ${duration(curve.waitTargetSeconds)}`}
              width={props.width}
            />
          </Chart>
          <table
            className="jp-Quota-balanceTable jp-QuotaRecommend-curveTable"
            aria-label="Capacity curve"
          >
            <thead>
              <tr>
                <th scope="col">GPUs</th>
                <th scope="col" className="jp-Quota-quantity">
                  Worst p90 wait
                </th>
                <th scope="col" className="jp-Quota-quantity">
                  Refused
                </th>
                <th scope="col" className="jp-Quota-quantity">
                  Cost
                </th>
              </tr>
            </thead>
            <tbody>
              {[...curve.points]
                .sort((a, b) => a.gpus - b.gpus)
                .map(p => (
                  <tr key={p.gpus} data-gpus={p.gpus}>
                    <th scope="row">{p.gpus}</th>
                    <td className="jp-Quota-quantity">
                      {duration(p.worstWaitP90Seconds)}
                    </td>
                    <td className="jp-Quota-quantity">{p.refused}</td>
                    <td className="jp-Quota-quantity">
                      {p.cost === null
                        ? '–'
                        : formatCost(p.cost, curve.currency)}
                    </td>
                  </tr>
                ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
