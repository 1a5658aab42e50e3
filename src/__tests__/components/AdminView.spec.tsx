/**
 * @jest-environment jsdom
 */

import { act, render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import * as React from 'react';

import { AdminView } from '../../components/AdminView';
import { localTime } from '../../increases';
import { ProfileEditor } from '../../profileeditor';
import { IIncrease, IProfile } from '../../tokens';
import {
  ANN,
  apiError,
  FakeServer,
  increase,
  job,
  loadedModel,
  NOW,
  summary
} from './fixtures';

const EXPIRES = '2026-12-01T18:00:00Z';

function profile(team: string, gpus: string): IProfile {
  return {
    team,
    namespace: `team-${team}`,
    hard: { 'requests.nvidia.com/gpu': gpus, 'requests.cpu': '8' }
  } as unknown as IProfile;
}

class FakeAdminClient {
  list: IIncrease[] = [];
  increases = jest.fn(async () => ({ increases: this.list, metadata: {} }));
  requestIncrease = jest.fn();
  decideIncrease = jest.fn(
    async (name: string, approve: boolean, comment: string) => {
      void comment;
      return increase({ name, phase: approve ? 'Approved' : 'Denied' });
    }
  );
  audit = jest.fn(
    async () =>
      ({
        entries: [
          {
            id: 1,
            at: '2026-12-01T10:00:00Z',
            who: 'ann',
            action: 'increase.requested',
            target: 'increase/team-alpha/inc-1',
            detail: ''
          }
        ]
      }) as never
  );
  auditCsvUrl = () => '/quota/v1/audit?format=csv';
  chargebackCsvUrl = (month: string) =>
    `/quota/v1/chargeback?month=${month}&format=csv`;
  usage = jest.fn(async () => ({ rows: [], since: '', until: '' }) as never);
  chargeback = jest.fn(async () => ({ rows: [], totals: {} }) as never);
  profiles = jest.fn(async () => ({
    profiles: [profile('alpha', '2'), profile('beta', '4')]
  }));
  putProfile = jest.fn(async (team: string, p: IProfile) => p);
  recommendations = jest.fn(async () => ({ recommendations: [] }) as never);
  replay = jest.fn();
}

async function setUp(client: FakeAdminClient) {
  const server = new FakeServer();
  server.identityOf = { ...ANN, name: 'quota-admin', admin: true };
  server.namespacesList = [
    summary('team-alpha', { hard: '4', used: '1', remaining: '3' }),
    summary('team-beta', { hard: '4', used: '0', remaining: '4' })
  ];
  server.jobList = [
    job({
      name: 'stuck',
      stalled: {
        since: '2026-12-01T11:00:00Z',
        reason: 'NoLogProgress',
        message: 'no log output for 60 minutes'
      }
    })
  ];
  const model = await loadedModel(server);
  const editor = new ProfileEditor({ client });
  await editor.load();
  const estimatorErrors = jest.fn(async () => ({ rows: [] }) as never);
  jest.spyOn(Date, 'now').mockReturnValue(NOW);
  await act(async () => {
    render(
      <AdminView
        model={model}
        editor={editor}
        client={client as never}
        estimatorErrors={estimatorErrors}
      />
    );
  });
  return { model, editor, estimatorErrors };
}

afterEach(() => jest.restoreAllMocks());

describe('AdminView', () => {
  it("shows every team's balance as the API returned it, and the stalled jobs", async () => {
    await setUp(new FakeAdminClient());
    const alpha = screen.getByRole('table', { name: 'Balance of team-alpha' });
    const gpu = alpha.querySelector("tr[data-key='requests.nvidia.com/gpu']")!;
    expect(gpu).toHaveAttribute('data-hard', '4');
    expect(
      within(gpu as HTMLElement)
        .getAllByRole('cell')
        .map(c => c.textContent)
    ).toEqual(['1 GPU', '4 GPUs', '3 GPUs']);
    expect(
      screen.getByRole('table', { name: 'Balance of team-beta' })
    ).toBeInTheDocument();
    expect(
      within(alpha).getByRole('columnheader', { name: 'Allowed' })
    ).toHaveAttribute('title', expect.stringMatching(/^hard: /));
    const stalled = screen.getByRole('list', { name: 'Stalled jobs' });
    expect(within(stalled).getByRole('listitem')).toHaveTextContent(
      'no log output for 60 minutes'
    );
  });

  it('explains that the profile form edits the base quota that an approved increase adds to', async () => {
    const client = new FakeAdminClient();
    client.list = [
      increase({ name: 'inc-1', phase: 'Approved', expiresAt: EXPIRES })
    ];
    await setUp(client);
    const form = screen.getByRole('form', { name: 'Edit a team profile' });
    const gpuField = form.querySelector(
      "[data-key='requests.nvidia.com/gpu'] input"
    ) as HTMLInputElement;
    expect(gpuField.value).toBe('2');
    expect(within(form).getByRole('note')).toHaveTextContent(
      `This is the base quota. The balance of team-alpha above adds its temporary increases: +2 GPUs until ${localTime(EXPIRES, NOW)} (inc-1).`
    );
    const alpha = screen.getByRole('table', { name: 'Balance of team-alpha' });
    expect(alpha).toHaveTextContent(
      `includes +2 GPUs until ${localTime(EXPIRES, NOW)}`
    );
    // beta's own profile has no increase
    await userEvent.selectOptions(within(form).getByLabelText('Team'), 'beta');
    expect(within(form).getByRole('note')).toHaveTextContent(
      'This is the base quota. Approved temporary increases add to it until they expire.'
    );
  });

  it('approves a pending request with the comment, and shows a refused decision', async () => {
    const client = new FakeAdminClient();
    client.list = [increase({ name: 'inc-1' })];
    await setUp(client);
    const pending = await screen.findByRole('list', {
      name: 'Pending requests'
    });
    const request = within(pending).getByRole('listitem');
    await userEvent.type(
      within(request).getByLabelText('Comment on inc-1'),
      'ok'
    );
    client.decideIncrease.mockRejectedValueOnce(
      apiError(403, 'Forbidden', 'an admin may not approve their own request')
    );
    await userEvent.click(
      within(request).getByRole('button', { name: 'Approve inc-1' })
    );
    expect(await screen.findByRole('alert')).toHaveTextContent(
      'an admin may not approve their own request'
    );
    client.list = [
      increase({ name: 'inc-1', phase: 'Approved', expiresAt: EXPIRES })
    ];
    await userEvent.click(
      within(request).getByRole('button', { name: 'Approve inc-1' })
    );
    expect(await screen.findByText('inc-1 is Approved.')).toBeInTheDocument();
    expect(client.decideIncrease).toHaveBeenLastCalledWith('inc-1', true, 'ok');
    const decided = screen.getByRole('list', { name: 'Decided requests' });
    await waitFor(() =>
      expect(within(decided).getByRole('listitem')).toHaveAttribute(
        'data-phase',
        'Approved'
      )
    );
  });

  it('shows the audit log in local time, and its failure with Try again', async () => {
    const client = new FakeAdminClient();
    client.audit.mockRejectedValueOnce(
      apiError(500, 'Error', 'the log is locked')
    );
    await setUp(client);
    expect(
      screen.getByText('Could not read the audit log: the log is locked')
    ).toHaveAttribute('role', 'alert');
    await userEvent.click(
      screen.getByRole('button', { name: 'Read the audit log again' })
    );
    const audit = await screen.findByRole('table', { name: 'Audit log' });
    await waitFor(() =>
      expect(audit.querySelectorAll('tbody tr')).toHaveLength(1)
    );
    expect(
      within(audit).getByText(localTime('2026-12-01T10:00:00Z'))
    ).toHaveAttribute('title', '2026-12-01T10:00:00Z');
  });
});
