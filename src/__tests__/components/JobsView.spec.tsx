/**
 * @jest-environment jsdom
 */

import { act, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import { useModel } from '../../components/hooks';
import { JobsView } from '../../components/JobsView';
import { QuotaModel } from '../../model';
import { IJob } from '../../tokens';
import {
  apiError,
  deferred,
  FakeServer,
  job,
  loadedModel,
  MEMORY as memory,
  NOW
} from './fixtures';

async function setUp(jobs: IJob[], older: IJob[] = []) {
  const server = new FakeServer();
  server.jobList = jobs;
  server.olderList = older;
  const model: QuotaModel = await loadedModel(server);
  const confirm = jest.fn(async () => true);
  // As the sidebar does: draw again on every change of the model.
  function Live() {
    useModel(model);
    return (
      <JobsView
        model={model}
        namespace="team-alpha"
        now={NOW}
        tailLines={50}
        confirm={confirm}
      />
    );
  }
  await act(async () => {
    render(<Live />);
  });
  return { server, model, confirm };
}

function item(name: string): HTMLElement {
  return document.querySelector(`li[data-job='${name}']`) as HTMLElement;
}

describe('JobsView', () => {
  it('lists the jobs the API returned: name, phase, owner, GPUs, age', async () => {
    await setUp([
      job({ name: 'sft-1', phase: 'Running', gpus: 2 }),
      job({ name: 'sft-0', phase: 'Succeeded', owner: 'bo' })
    ]);
    const list = screen.getByRole('list', { name: 'Jobs in team-alpha' });
    expect(within(list).getAllByRole('listitem')).toHaveLength(2);
    expect(item('sft-1')).toHaveTextContent('sft-1Running');
    expect(item('sft-1')).toHaveTextContent('ann · 2 GPUs · 1 h old');
    // ann may cancel her running job, not bo's ended one
    expect(
      screen.getByRole('button', { name: 'Cancel sft-1' })
    ).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Cancel sft-0' })).toBeNull();
  });

  it("shows a user's own cancel as a neutral Cancelled, not a red Failed", async () => {
    await setUp([
      job({
        name: 'sft-1',
        phase: 'Failed',
        reason: 'Cancelled',
        message: 'cancelled by ann'
      }),
      job({ name: 'sft-2', phase: 'Failed', reason: 'Error', exitCode: 1 })
    ]);
    const cancelled = item('sft-1').querySelector('.jp-QuotaJob-phase')!;
    expect(cancelled).toHaveTextContent('Cancelled');
    expect(cancelled).toHaveClass('jp-mod-cancelled');
    expect(cancelled).not.toHaveClass('jp-mod-failed');
    expect(
      item('sft-1').querySelector('.jp-QuotaJob-reason')
    ).toHaveTextContent('Cancelled by ann');
    const failed = item('sft-2').querySelector('.jp-QuotaJob-phase')!;
    expect(failed).toHaveTextContent('Failed');
    expect(failed).toHaveClass('jp-mod-failed');
  });

  it('gives a CPU-only job no per-GPU estimate', async () => {
    await setUp([
      job({ name: 'cpu', gpus: 0, memory }),
      job({ name: 'gpu', gpus: 1, memory })
    ]);
    expect(item('cpu').querySelector('.jp-QuotaJob-memory')).toBeNull();
    expect(item('gpu').querySelector('.jp-QuotaJob-memory')).toHaveTextContent(
      'estimated 3.1 GiB (2.8–3.5) per GPU'
    );
  });

  it('cancels after confirming: busy while the server answers, its refusal shown, Try again cancels again', async () => {
    const { server, confirm } = await setUp([job({ name: 'sft-1' })]);
    const gate = deferred<IJob>();
    server.cancel.mockReturnValueOnce(gate.promise);
    const cancel = screen.getByRole('button', { name: 'Cancel sft-1' });
    await userEvent.click(cancel);
    expect(confirm).toHaveBeenCalledTimes(1);
    expect(cancel).toBeDisabled();
    await act(async () => {
      gate.reject(apiError(409, 'Conflict', 'sft-1 has already ended'));
    });
    expect(screen.getByRole('alert')).toHaveTextContent(
      'sft-1 has already ended'
    );
    expect(cancel).toBeEnabled();
    await userEvent.click(
      screen.getByRole('button', { name: 'Try again: sft-1' })
    );
    await waitFor(() => expect(screen.queryByRole('alert')).toBeNull());
    expect(server.cancel.mock.calls).toEqual([
      ['team-alpha', 'sft-1'],
      ['team-alpha', 'sft-1']
    ]);
    expect(confirm).toHaveBeenCalledTimes(1); // the retry does not ask again
  });

  it('does not cancel when the user says no', async () => {
    const { server, confirm } = await setUp([job({ name: 'sft-1' })]);
    confirm.mockResolvedValueOnce(false);
    await userEvent.click(screen.getByRole('button', { name: 'Cancel sft-1' }));
    expect(server.cancel).not.toHaveBeenCalled();
  });

  it('shows how many older jobs it leaves out, and the next page on Show more', async () => {
    const { server } = await setUp(
      [job({ name: 'sft-3' })],
      [
        job({ name: 'sft-2', phase: 'Succeeded' }),
        job({ name: 'sft-1', phase: 'Succeeded' })
      ]
    );
    expect(screen.getByRole('status')).toHaveTextContent(
      'Showing the newest 1 of 3 jobs'
    );
    await userEvent.click(
      screen.getByRole('button', { name: 'Show older jobs in team-alpha' })
    );
    await waitFor(() => expect(item('sft-1')).not.toBeNull());
    expect(server.jobs).toHaveBeenLastCalledWith('team-alpha', {
      continue: 'page-2'
    });
    expect(screen.queryByRole('status')).toBeNull();
  });
});
