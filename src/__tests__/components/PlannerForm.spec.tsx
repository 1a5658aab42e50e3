/**
 * @jest-environment jsdom
 */

import { act, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import { IPlannerClient } from '../../components/plannerClient';
import { PlannerForm } from '../../components/PlannerForm';
import { QuotaModel } from '../../model';
import { IEstimate, IPlan, IPlanResult } from '../../tokens';
import {
  apiError,
  deferred,
  FakeServer,
  FakeVerifier,
  job,
  loadedModel,
  verification
} from './fixtures';

const GIB = 2 ** 30;

function estimate(gib: number): IEstimate {
  return {
    peakBytesPerGpu: gib * GIB,
    peakGibPerGpu: gib,
    rangeBytesPerGpu: [(gib - 1) * GIB, (gib + 1) * GIB],
    rangeGibPerGpu: [gib - 1, gib + 1],
    breakdown: { weights: (gib / 2) * GIB, activations: (gib / 2) * GIB },
    regime: 'lora',
    approximate: false,
    gpus: 1,
    args: [],
    model: {},
    assumptions: []
  } as unknown as IEstimate;
}

function planResult(): IPlanResult {
  const plan = {
    args: ['--model', 'Qwen/Qwen2.5-0.5B-Instruct', '--max_length', '1024'],
    gpus: 1,
    resources: null,
    estimate: estimate(12),
    summary: '1 GPU, max length 1024: 12 GiB of 24 GiB',
    changes: [
      { field: 'max_length', from: 2048, to: 1024, why: 'fits one GPU' }
    ],
    marginal: false
  } as unknown as IPlan;
  return {
    namespace: 'team-alpha',
    recommended: plan,
    candidates: [plan],
    rejected: []
  } as unknown as IPlanResult;
}

class FakePlanner extends FakeVerifier implements IPlannerClient {
  estimate = jest.fn(async (args: string[], gpus: number) => {
    (void args, void gpus);
    return estimate(20);
  });
  plan = jest.fn(async (namespace: string, args: string[]) => {
    (void namespace, void args);
    return planResult();
  });
  inventory = jest.fn(async () => ({ gpus: [{ memory: '24Gi' }] }) as never);
  models = jest.fn(async () => ({ models: [] }) as never);
}

async function setUp() {
  const server = new FakeServer();
  const model: QuotaModel = await loadedModel(server);
  const planner = new FakePlanner();
  const copy = jest.fn();
  // Let the catalog and inventory reads settle before the test acts.
  await act(async () => {
    render(<PlannerForm model={model} client={planner} copy={copy} />);
  });
  const form = screen.getByRole('form', { name: 'Plan a fine-tune' });
  return { server, model, planner, copy, form };
}

describe('PlannerForm', () => {
  it('says why "Estimate and plan" is disabled, until a model is entered', async () => {
    const { form } = await setUp();
    const submit = within(form).getByRole('button', {
      name: 'Estimate and plan'
    });
    expect(submit).toBeDisabled();
    expect(submit).toHaveAccessibleDescription('Enter a model first.');
    expect(submit).toHaveAttribute('title', 'Enter a model first.');
    await userEvent.type(within(form).getByLabelText(/^Model/), 'Qwen/x');
    expect(submit).toBeEnabled();
    expect(submit).not.toHaveAttribute('title');
    expect(within(form).queryByText('Enter a model first.')).toBeNull();
  });

  it('shows the model field as empty, with an example rather than a value', async () => {
    const { form } = await setUp();
    const input = within(form).getByLabelText(/^Model/) as HTMLInputElement;
    expect(input.value).toBe('');
    expect(input.placeholder).toMatch(/^e\.g\. /);
  });

  it('is busy while the server answers, then shows its estimate and plan', async () => {
    const { form, planner } = await setUp();
    const gate = deferred<IEstimate>();
    planner.estimate.mockReturnValueOnce(gate.promise);
    await userEvent.type(
      within(form).getByLabelText(/^Model/),
      'Qwen/Qwen2.5-0.5B-Instruct'
    );
    await userEvent.click(
      within(form).getByRole('button', { name: 'Estimate and plan' })
    );
    const submit = within(form).getByRole('button', {
      name: 'Estimate and plan'
    });
    expect(submit).toBeDisabled();
    expect(submit).toHaveAccessibleDescription(/Waiting for the server/);
    gate.resolve(estimate(20));
    expect(
      await within(form).findByText('1 GPU, max length 1024: 12 GiB of 24 GiB')
    ).toBeInTheDocument();
    expect(submit).toBeEnabled();
    expect(planner.estimate).toHaveBeenCalledWith(
      expect.arrayContaining(['--model', 'Qwen/Qwen2.5-0.5B-Instruct']),
      1
    );
    expect(planner.plan.mock.calls[0][0]).toBe('team-alpha');
    expect(
      within(form).getByText('max_length: 2048 → 1024 (fits one GPU)')
    ).toBeInTheDocument();
    expect(
      within(form).getByRole('button', { name: 'Launch recommended plan' })
    ).toBeEnabled();
  });

  it('verifies the recommended plan on request, with its arguments, and shows the simulated peak beside the estimate', async () => {
    const { form, planner } = await setUp();
    await userEvent.type(
      within(form).getByLabelText(/^Model/),
      'Qwen/Qwen2.5-0.5B-Instruct'
    );
    await userEvent.click(
      within(form).getByRole('button', { name: 'Estimate and plan' })
    );
    const verify = await within(form).findByRole('button', {
      name: 'Verify with a simulated step'
    });
    expect(planner.startVerification).not.toHaveBeenCalled();
    // settled at once: the same argv verified before (polling is PlanVerification.spec's)
    planner.startVerification.mockImplementationOnce(async (args, gpus) =>
      verification('done', args, gpus)
    );
    await userEvent.click(verify);
    expect(planner.startVerification).toHaveBeenCalledWith(
      planResult().recommended!.args,
      1
    );
    // 13.5 GiB against the plan's 12 GiB estimate
    const shown = await within(form).findByText(/Simulated step:/);
    expect(shown).toHaveTextContent('13.50 GiB per GPU (+13% of the estimate)');
    expect(shown).toHaveTextContent('at the backward');
  });

  it('says the planner is unavailable on a server without the route', async () => {
    const { form, planner } = await setUp();
    const missing = apiError(404, 'ServerExtensionMissing', 'not found');
    planner.estimate.mockRejectedValueOnce(missing);
    planner.plan.mockRejectedValueOnce(missing);
    await userEvent.type(within(form).getByLabelText(/^Model/), 'm');
    await userEvent.click(
      within(form).getByRole('button', { name: 'Estimate and plan' })
    );
    const unavailable = await within(form).findAllByText(
      /no estimator or planner yet/
    );
    expect(unavailable).toHaveLength(2);
    expect(
      within(form).getByRole('button', { name: 'Launch as written' })
    ).toBeEnabled();
  });

  it("launches the recommended plan, and shows a refusal's message", async () => {
    const { form, server } = await setUp();
    await userEvent.type(within(form).getByLabelText(/^Model/), 'm');
    await userEvent.click(
      within(form).getByRole('button', { name: 'Estimate and plan' })
    );
    const launch = await within(form).findByRole('button', {
      name: 'Launch recommended plan'
    });
    server.submit.mockRejectedValueOnce(
      apiError(403, 'ExceededQuota', 'exceeded quota: team-alpha')
    );
    await userEvent.click(launch);
    expect(await within(form).findByRole('alert')).toHaveTextContent(
      'exceeded quota: team-alpha'
    );
    server.submit.mockResolvedValueOnce(
      job({ name: 'sft-9', phase: 'Pending' })
    );
    await userEvent.click(launch);
    expect(await within(form).findByRole('status')).toHaveTextContent(
      'Launched sft-9 in team-alpha (Pending).'
    );
    expect(within(form).queryByRole('alert')).toBeNull();
    expect(server.submit).toHaveBeenLastCalledWith('team-alpha', {
      args: planResult().recommended!.args,
      gpus: 1,
      resources: undefined
    });
  });

  it('says why Launch is disabled for a user in no team namespace', async () => {
    const server = new FakeServer();
    server.namespacesList = [];
    const model = await loadedModel(server);
    await act(async () => {
      render(
        <PlannerForm
          model={model}
          client={new FakePlanner()}
          copy={jest.fn()}
        />
      );
    });
    await userEvent.type(screen.getByLabelText(/^Model/), 'm');
    const launch = screen.getByRole('button', { name: 'Launch as written' });
    expect(launch).toBeDisabled();
    expect(launch).toHaveAccessibleDescription(
      'You belong to no team namespace to launch in.'
    );
    await waitFor(() =>
      expect(
        screen.getByRole('button', { name: 'Estimate and plan' })
      ).toBeEnabled()
    );
  });
});
