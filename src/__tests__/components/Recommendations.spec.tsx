/**
 * @jest-environment jsdom
 */

import { act, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import { CapacityCurve } from '../../components/CapacityCurve';
import {
  DemandPlot,
  RecommendationsSection
} from '../../components/Recommendations';
import {
  ICapacityCurve,
  IProfile,
  IRecommendation,
  IReplay
} from '../../tokens';
import { apiError, deferred } from './fixtures';

const GPU = 'requests.nvidia.com/gpu';

function row(fields: Partial<IRecommendation> = {}): IRecommendation {
  return {
    team: 'alpha',
    namespace: 'team-alpha',
    resource: GPU,
    current: '2',
    recommended: '3',
    lower: '1',
    upper: '5',
    demandP90: '2.5',
    exceededShare: 0.31,
    idleShare: 0.12,
    waitP90Seconds: 7800,
    explanation:
      'in the last 28 days alpha needed more than 2 GPUs 31% of the time; p90 wait 2 h 10 m',
    series: {
      since: '2026-11-03T12:00:00Z',
      step: 7200,
      unit: 'GPUs',
      quota: 2,
      demand: [0, 1, 3, 2, 4],
      held: [0, 1, 2, 2, 2]
    },
    ...fields
  };
}

const BETA_CPU = row({
  team: 'beta',
  namespace: 'team-beta',
  resource: 'requests.cpu',
  current: '8',
  recommended: '8',
  lower: '4',
  upper: '12',
  exceededShare: 0,
  idleShare: 0.5,
  waitP90Seconds: null,
  explanation:
    'in the last 28 days beta needed more than 8 cores 0% of the time; p90 wait no jobs'
});

const ALPHA: IProfile = {
  team: 'alpha',
  namespace: 'team-alpha',
  users: ['ann'],
  hard: { [GPU]: '2', 'requests.cpu': '8' }
} as IProfile;

class FakeClient {
  rows = [row(), BETA_CPU];
  recommendations = jest.fn(async (series?: boolean) => {
    void series;
    return { recommendations: this.rows };
  });
  putProfile = jest.fn(async (team: string, p: IProfile) => {
    void team;
    return p;
  });
}

async function renderSection(client: FakeClient, admin: boolean) {
  const onApplied = jest.fn();
  await act(async () => {
    render(
      <RecommendationsSection
        client={client}
        idPrefix="test"
        apply={
          admin
            ? {
                client,
                stored: team => (team === 'alpha' ? ALPHA : null),
                onApplied
              }
            : undefined
        }
      />
    );
  });
  await screen.findByRole('table', { name: 'Recommended hard quotas' });
  return { onApplied };
}

// The charts' chunk (Recharts) loads lazily on first use: load it once here, so that its
// compile on a loaded 2-core machine does not eat into the first test's time.
beforeAll(() => import('../../components/RecommendationCharts'), 120000);

describe('RecommendationsSection', () => {
  it('shows each row: team, resource, current, recommended, range, exceeded and idle share, p90 wait and the words', async () => {
    const client = new FakeClient();
    await renderSection(client, true);
    expect(client.recommendations).toHaveBeenCalledWith(true);
    const table = screen.getByRole('table', {
      name: 'Recommended hard quotas'
    });
    const alpha = table.querySelector(
      `tr[data-team='alpha'][data-resource='${GPU}']`
    ) as HTMLElement;
    expect(
      [
        within(alpha).getByRole('rowheader'),
        ...within(alpha).getAllByRole('cell')
      ]
        .slice(0, 8)
        .map(c => c.textContent)
    ).toEqual(['alpha', GPU, '2', '3', '1–5', '31%', '12%', '2 h 10 m']);
    expect(table).toHaveTextContent(
      'in the last 28 days alpha needed more than 2 GPUs 31% of the time; p90 wait 2 h 10 m'
    );
    const beta = table.querySelector("tr[data-team='beta']") as HTMLElement;
    expect(within(beta).getAllByRole('cell')[6].textContent).toBe('–');
    // Apply is offered where it changes the quota only
    expect(
      within(beta).getByRole('button', { name: /^Apply 8/ })
    ).toBeDisabled();
  });

  it("a team member's view has no Apply, only the rows and the plot", async () => {
    const client = new FakeClient();
    client.rows = [row()];
    await renderSection(client, false);
    expect(screen.queryByRole('button', { name: /Apply/ })).toBeNull();
    expect(screen.queryByRole('columnheader', { name: 'Apply' })).toBeNull();
    const plot = document.querySelector('figure.jp-QuotaRecommend-plot')!;
    expect(plot).toHaveAttribute('data-team', 'alpha');
    expect(plot).toHaveAttribute('data-points', '5');
  });

  it('Apply puts the stored profile with the recommended quantity, says so, and reads the rows again', async () => {
    const client = new FakeClient();
    const { onApplied } = await renderSection(client, true);
    client.rows = [row({ current: '3' }), BETA_CPU];
    await userEvent.click(
      screen.getByRole('button', { name: `Apply 3 to alpha's ${GPU}` })
    );
    expect(client.putProfile).toHaveBeenCalledWith('alpha', {
      ...ALPHA,
      hard: { [GPU]: '3', 'requests.cpu': '8' }
    });
    expect(await screen.findByRole('status')).toHaveTextContent(
      `Applied: alpha's ${GPU} is now 3 (was 2).`
    );
    expect(onApplied).toHaveBeenCalledTimes(1);
    await waitFor(() =>
      expect(client.recommendations).toHaveBeenCalledTimes(2)
    );
    await waitFor(() =>
      expect(document.querySelector(`tr[data-team='alpha']`)).toHaveAttribute(
        'data-current',
        '3'
      )
    );
  });

  it('an Apply that overcommits the inventory is applied and shows the warning', async () => {
    const client = new FakeClient();
    await renderSection(client, true);
    const warning =
      "with this profile the teams' requests.nvidia.com/gpu quotas add up to 5 GPUs, more than the 4 GPUs of the inventory";
    client.putProfile.mockImplementationOnce(async (team, p) => {
      void team;
      return { ...p, warnings: [warning] };
    });
    await userEvent.click(
      screen.getByRole('button', { name: `Apply 3 to alpha's ${GPU}` })
    );
    expect(await screen.findByRole('status')).toHaveTextContent(
      `Applied: alpha's ${GPU} is now 3 (was 2).`
    );
    expect(
      screen.getByRole('list', {
        name: 'Warnings on the applied recommendation'
      })
    ).toHaveTextContent(warning);
  });

  it("a refused Apply shows the API's message and changes nothing", async () => {
    const client = new FakeClient();
    const { onApplied } = await renderSection(client, true);
    client.putProfile.mockRejectedValueOnce(
      apiError(
        400,
        'InvalidProfile',
        "profile 'alpha': hard quota requests.nvidia.com/gpu 3 is above the cluster's 2 GPUs"
      )
    );
    await userEvent.click(
      screen.getByRole('button', { name: `Apply 3 to alpha's ${GPU}` })
    );
    expect(await screen.findByRole('alert')).toHaveTextContent(
      "Could not apply the recommendation: profile 'alpha': hard quota requests.nvidia.com/gpu 3 is above the cluster's 2 GPUs"
    );
    expect(onApplied).not.toHaveBeenCalled();
    expect(client.recommendations).toHaveBeenCalledTimes(1);
  });

  it('the plot follows the row chosen', async () => {
    const client = new FakeClient();
    await renderSection(client, true);
    const plot = () => document.querySelector('figure.jp-QuotaRecommend-plot')!;
    expect(plot()).toHaveAttribute('data-resource', GPU);
    await userEvent.click(
      screen.getByRole('radio', { name: "Plot beta's requests.cpu" })
    );
    expect(plot()).toHaveAttribute('data-team', 'beta');
  });
});

describe('DemandPlot', () => {
  it('draws the demand and what ran as steps, with the quota and the recommendation as lines', async () => {
    await act(async () => {
      render(<DemandPlot row={row()} width={500} />);
    });
    const chart = await screen.findByRole('img', {
      name: `alpha's demand for ${GPU} against its quota of 2, over the window`
    });
    await waitFor(() =>
      expect(chart.querySelectorAll('.recharts-line').length).toBe(1)
    );
    expect(chart.querySelectorAll('.recharts-area').length).toBe(1);
    expect(chart).toHaveTextContent('quota 2');
    expect(chart).toHaveTextContent('recommended 3');
    expect(chart.querySelectorAll('.recharts-reference-line').length).toBe(2);
  });
});

const CURVE: ICapacityCurve = {
  currency: 'EUR',
  waitTargetSeconds: 3600,
  gpusForWaitTarget: 12,
  points: [
    {
      gpus: 12,
      worstWaitP90Seconds: 58,
      refused: 0,
      waiting: 0,
      utilization: 0.5,
      cost: 20160
    },
    {
      gpus: 5,
      worstWaitP90Seconds: 28680,
      refused: 3,
      waiting: 1,
      utilization: 0.9,
      cost: 8400
    },
    {
      gpus: 10,
      worstWaitP90Seconds: 3840,
      refused: 0,
      waiting: 0,
      utilization: 0.6,
      cost: 16800
    }
  ]
};

describe('CapacityCurve', () => {
  const profiles = [ALPHA];

  it('replays under the stored profiles on request and shows the curve, the answer and the figures', async () => {
    const replay = jest.fn(
      async () => ({ curve: CURVE }) as unknown as IReplay
    );
    render(
      <CapacityCurve
        client={{ replay }}
        profiles={() => profiles}
        width={500}
      />
    );
    expect(replay).not.toHaveBeenCalled(); // a replay is work: only when asked
    await userEvent.click(
      screen.getByRole('button', { name: 'Replay at several sizes' })
    );
    expect(replay).toHaveBeenCalledWith({ profiles, curve: true });
    expect(
      await screen.findByText(
        "12 GPUs keep every team's p90 wait within 1 h (EUR 20,160 for the window)."
      )
    ).toBeInTheDocument();
    const table = screen.getByRole('table', { name: 'Capacity curve' });
    expect(
      within(table)
        .getAllByRole('rowheader')
        .map(c => c.textContent)
    ).toEqual(['5', '10', '12']);
    expect(table.querySelector("tr[data-gpus='5']")).toHaveTextContent(
      '7 h 58 m'
    );
    const chart = await screen.findByRole('img', {
      name: /worst team's p90 wait/
    });
    await waitFor(() =>
      expect(chart.querySelector('.recharts-line')).not.toBeNull()
    );
    expect(chart).toHaveTextContent('target 1 h');
  });

  it('a busy server (429) shows its message with Try again', async () => {
    const answer = deferred<IReplay>();
    const replay = jest
      .fn()
      .mockRejectedValueOnce(
        apiError(
          429,
          'TooManyRequests',
          'busy: a replay is in progress, the most this server runs at once; retry in 5 s'
        )
      )
      .mockReturnValueOnce(answer.promise);
    render(
      <CapacityCurve
        client={{ replay }}
        profiles={() => profiles}
        width={500}
      />
    );
    await userEvent.click(
      screen.getByRole('button', { name: 'Replay at several sizes' })
    );
    expect(await screen.findByRole('alert')).toHaveTextContent(
      'Could not replay: busy: a replay is in progress'
    );
    await userEvent.click(screen.getByRole('button', { name: 'Replay again' }));
    expect(replay).toHaveBeenCalledTimes(2);
    await act(async () =>
      answer.resolve({ curve: CURVE } as unknown as IReplay)
    );
    expect(screen.queryByRole('alert')).toBeNull();
  });
});
