/**
 * @jest-environment jsdom
 */

import { act, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import {
  IIncreaseClient,
  IncreaseForm,
  useIncreases
} from '../../components/Increases';
import { localTime } from '../../increases';
import { QuotaModel } from '../../model';
import { IIncrease, IIncreaseRequest } from '../../tokens';
import {
  apiError,
  deferred,
  FakeServer,
  increase,
  loadedModel
} from './fixtures';

class FakeIncreases implements IIncreaseClient {
  list: IIncrease[] = [];
  increases = jest.fn(async () => ({ increases: this.list, metadata: {} }));
  requestIncrease = jest.fn(
    async (namespace: string, request: IIncreaseRequest) => {
      const made = increase({ name: 'inc-7', namespace, ...request });
      this.list = [made, ...this.list];
      return made;
    }
  );
}

async function setUp(client: FakeIncreases) {
  const model: QuotaModel = await loadedModel(new FakeServer());
  function Harness() {
    const increases = useIncreases(client, model);
    return <IncreaseForm model={model} client={client} increases={increases} />;
  }
  await act(async () => {
    render(<Harness />);
  });
  return screen.getByRole('form', { name: 'Ask for a temporary increase' });
}

describe('IncreaseForm', () => {
  it('asks for more GPUs of the namespace, then lists the new request', async () => {
    const client = new FakeIncreases();
    const form = await setUp(client);
    expect(screen.getByText('No requests.')).toBeInTheDocument();
    await userEvent.clear(within(form).getByLabelText('More GPUs'));
    await userEvent.type(within(form).getByLabelText('More GPUs'), '2');
    await userEvent.clear(within(form).getByLabelText('For hours'));
    await userEvent.type(within(form).getByLabelText('For hours'), '4');
    await userEvent.type(within(form).getByLabelText('Reason'), 'a deadline');
    await userEvent.click(
      within(form).getByRole('button', { name: 'Ask for more' })
    );
    expect(await within(form).findByRole('status')).toHaveTextContent(
      'Asked: inc-7 is Pending; an admin approves or denies it.'
    );
    expect(client.requestIncrease).toHaveBeenCalledWith('team-alpha', {
      resources: { 'requests.nvidia.com/gpu': '2' },
      hours: 4,
      reason: 'a deadline'
    });
    const list = screen.getByRole('list', { name: "Your teams' requests" });
    await waitFor(() =>
      expect(within(list).getByRole('listitem')).toHaveAttribute(
        'data-name',
        'inc-7'
      )
    );
    expect(within(form).getByLabelText('Reason')).toHaveValue('');
  });

  it('is busy while the server answers, and shows its refusal', async () => {
    const client = new FakeIncreases();
    const form = await setUp(client);
    const gate = deferred<IIncrease>();
    client.requestIncrease.mockReturnValueOnce(gate.promise);
    const ask = within(form).getByRole('button', { name: 'Ask for more' });
    await userEvent.click(ask);
    expect(ask).toBeDisabled();
    await act(async () => {
      gate.reject(apiError(400, 'Invalid', 'hours must be at most 72'));
    });
    expect(within(form).getByRole('alert')).toHaveTextContent(
      'hours must be at most 72'
    );
    expect(ask).toBeEnabled();
  });

  it('shows a request in words and local time, with the exact key and time on hover', async () => {
    const client = new FakeIncreases();
    const expiresAt = '2026-12-01T18:00:00Z';
    client.list = [
      increase({ phase: 'Approved', decidedBy: 'quota-admin', expiresAt })
    ];
    await setUp(client);
    const item = await screen.findByRole('listitem');
    const amount = within(item).getByText('+2 GPUs');
    expect(amount).toHaveAttribute('title', 'requests.nvidia.com/gpu: 2');
    expect(item).not.toHaveTextContent('requests.nvidia.com/gpu');
    const until = within(item).getByText(localTime(expiresAt));
    expect(until.tagName).toBe('TIME');
    expect(until).toHaveAttribute('title', expiresAt);
    expect(item).toHaveTextContent('Approved by quota-admin until');
    expect(item).not.toHaveTextContent('T18:00:00Z');
  });

  it('says when the requests cannot be read, and reads them again on Try again', async () => {
    const client = new FakeIncreases();
    client.increases.mockRejectedValueOnce(
      apiError(0, 'Error', 'network down')
    );
    client.list = [increase()];
    await setUp(client);
    expect(screen.getByRole('alert')).toHaveTextContent(
      'Could not read the requests: network down'
    );
    await userEvent.click(
      screen.getByRole('button', { name: 'Read the requests again' })
    );
    expect(await screen.findByRole('listitem')).toHaveAttribute(
      'data-name',
      'inc-1'
    );
    expect(screen.queryByRole('alert')).toBeNull();
  });
});
