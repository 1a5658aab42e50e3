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
  endpoint,
  FakeServer,
  job,
  loadedModel,
  NOW
} from './fixtures';

async function setUp(
  jobs: IJob[],
  prepare: (server: FakeServer) => void = () => undefined
) {
  const server = new FakeServer();
  server.jobList = jobs;
  prepare(server);
  const model: QuotaModel = await loadedModel(server);
  const confirm = jest.fn(async () => true);
  function Live() {
    useModel(model);
    return (
      <JobsView
        model={model}
        namespace="team-alpha"
        now={NOW}
        tailLines={50}
        confirm={confirm}
        endpointInterval={5}
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

const SERVING: Partial<IJob> = {
  name: 'serve-x7k2p',
  kind: 'endpoint',
  phase: 'Running',
  gpus: 0
};

describe('Serve in the jobs list', () => {
  it('offers Serve on a finished fine-tune only, and serves it by its name', async () => {
    const { server } = await setUp([
      job({ name: 'tune', phase: 'Succeeded', gpus: 0 }),
      job({ name: 'gpu-tune', phase: 'Succeeded', gpus: 4 }),
      job({ name: 'running', phase: 'Running' }),
      job({ name: 'failed', phase: 'Failed', reason: 'Error' }),
      job({ ...SERVING, name: 'ep', phase: 'Succeeded' })
    ]);
    const serveButtons = screen
      .getAllByRole('button')
      .filter(b => b.textContent === 'Serve');
    expect(serveButtons.map(b => b.getAttribute('aria-label'))).toEqual([
      'Serve tune',
      'Serve gpu-tune'
    ]);
    await userEvent.click(screen.getByRole('button', { name: 'Serve tune' }));
    await userEvent.click(
      screen.getByRole('button', { name: 'Serve gpu-tune' })
    );
    expect(server.createEndpoint.mock.calls).toEqual([
      ['team-alpha', { job: 'tune', gpus: 0 }],
      ['team-alpha', { job: 'gpu-tune', gpus: 1 }]
    ]);
    expect(within(item('tune')).getByRole('status')).toHaveTextContent(
      'Serving its last checkpoint as endpoint serve-x7k2p.'
    );
    expect(server.jobs).toHaveBeenCalledTimes(3); // the list is read again after each
  });

  it("shows the server's refusal, and Try again serves again", async () => {
    const { server } = await setUp([job({ name: 'tune', phase: 'Succeeded' })]);
    server.createEndpoint.mockRejectedValueOnce(
      apiError(409, 'NotServable', 'job "tune" saved no checkpoint')
    );
    await userEvent.click(screen.getByRole('button', { name: 'Serve tune' }));
    expect(screen.getByRole('alert')).toHaveTextContent(
      'job "tune" saved no checkpoint'
    );
    await userEvent.click(
      screen.getByRole('button', { name: 'Try again: tune' })
    );
    await waitFor(() => expect(screen.queryByRole('alert')).toBeNull());
    expect(server.createEndpoint).toHaveBeenCalledTimes(2);
  });

  it('shows an endpoint Starting, then Ready with its URL, models and memory, and stops it', async () => {
    const { server, confirm } = await setUp([job(SERVING)], server =>
      server.endpoint
        .mockResolvedValueOnce(endpoint({ phase: 'Starting', models: [] }))
        .mockResolvedValueOnce(endpoint({ phase: 'Starting', models: [] }))
    );
    const view = screen.getByRole('group', { name: 'Endpoint serve-x7k2p' });
    await waitFor(() =>
      expect(view).toHaveAttribute('data-endpoint-phase', 'Ready')
    );
    expect(server.endpoint.mock.calls.length).toBeGreaterThanOrEqual(3);
    expect(within(view).getByRole('status')).toHaveTextContent(
      'Ready, serving tiny'
    );
    const link = within(view).getByRole('link');
    expect(link).toHaveAttribute(
      'href',
      `${window.location.origin}/quota/v1/namespaces/team-alpha/endpoints/serve-x7k2p/v1/`
    );
    expect(view).toHaveTextContent('memory 4Gi, at most 8Gi · no GPU (CPU)');
    expect(
      screen.queryByRole('button', { name: 'Cancel serve-x7k2p' })
    ).toBeNull();
    const calls = server.endpoint.mock.calls.length;
    await userEvent.click(
      screen.getByRole('button', { name: 'Stop endpoint serve-x7k2p' })
    );
    expect(confirm).toHaveBeenCalledTimes(1);
    expect(server.deleteEndpoint.mock.calls).toEqual([
      ['team-alpha', 'serve-x7k2p']
    ]);
    await waitFor(() =>
      expect(view).toHaveAttribute('data-endpoint-phase', 'Stopped')
    );
    expect(server.endpoint).toHaveBeenCalledTimes(calls); // Ready and Stopped are not read again
  });

  it('says why an idle endpoint stopped, and offers no Stop for one that ended', async () => {
    await setUp(
      [job({ ...SERVING, phase: 'Failed', reason: 'Idle' })],
      server =>
        server.endpoint.mockResolvedValue(
          endpoint({
            phase: 'Stopped',
            reason: 'Idle',
            models: [],
            message: 'no request reached the endpoint for 30 minutes'
          })
        )
    );
    const view = screen.getByRole('group', { name: 'Endpoint serve-x7k2p' });
    await waitFor(() =>
      expect(within(view).getByRole('status')).toHaveTextContent(
        'Stopped: no request reached the endpoint for 30 minutes'
      )
    );
    expect(within(view).queryByRole('link')).toBeNull();
    expect(within(view).queryByRole('button')).toBeNull();
  });
});
