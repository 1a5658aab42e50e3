/**
 * @jest-environment jsdom
 */

import { render, screen, within } from '@testing-library/react';
import * as React from 'react';

import { BalanceView } from '../../components/BalanceView';
import { localTime } from '../../increases';
import { increase, NOW, summary } from './fixtures';

const GPU = 'requests.nvidia.com/gpu';

describe('BalanceView', () => {
  it('draws a bar per quota key from what the API returned', () => {
    render(<BalanceView summary={summary('team-alpha')} now={NOW} />);
    const section = screen.getByRole('region', { name: /team-alpha/ });
    const meters = within(section).getAllByRole('meter');
    expect(meters.map(m => m.getAttribute('aria-valuetext'))).toEqual([
      '1 of 2 GPUs left',
      '6 of 8 CPUs left',
      '96 GiB of 128 GiB left'
    ]);
    const gpu = section.querySelector(`[data-key='${GPU}']`)!;
    expect(gpu).toHaveAttribute('data-hard', '2');
    expect(gpu).toHaveAttribute('title', `${GPU}: hard 2, used 1, remaining 1`);
    expect(within(section).getByText('as of 10 s ago')).toBeInTheDocument();
  });

  it('says requests, limits and hard in plain words, with the Kubernetes word on hover', () => {
    render(<BalanceView summary={summary('team-alpha')} now={NOW} />);
    const cpu = document.querySelector("[data-key='requests.cpu']")!;
    const side = within(cpu as HTMLElement).getByText('reserved');
    expect(side.title).toMatch(/^requests\.cpu: requests: what jobs reserve/);
    const memory = document.querySelector("[data-key='limits.memory']")!;
    expect(within(memory as HTMLElement).getByText('ceiling').title).toMatch(
      /^limits\.memory: limits: the most a job may use/
    );
    const allowed = within(cpu as HTMLElement).getByText('8 CPUs allowed');
    expect(allowed.title).toMatch(/^hard: .*spec\.hard/);
    expect(screen.queryByText(/\bhard\b/)).toBeNull();
  });

  it('says which GPUs of the hard limit are a temporary increase, and until when (local time)', () => {
    const expiresAt = '2026-12-01T18:00:00Z';
    const raised = summary('team-alpha', {
      hard: '4',
      used: '1',
      remaining: '3'
    });
    render(
      <BalanceView
        summary={raised}
        now={NOW}
        increases={[
          increase({ name: 'inc-1', phase: 'Approved', expiresAt }),
          // neither raises this balance now: another team's, and one that ended
          increase({
            name: 'inc-2',
            namespace: 'team-beta',
            phase: 'Approved',
            expiresAt
          }),
          increase({
            name: 'inc-3',
            phase: 'Expired',
            expiresAt: '2026-12-01T11:00:00Z'
          })
        ]}
      />
    );
    const gpu = document.querySelector(`[data-key='${GPU}']`) as HTMLElement;
    expect(within(gpu).getByText('4 GPUs allowed')).toBeInTheDocument();
    expect(gpu.querySelector('.jp-QuotaBar-increase')).toHaveTextContent(
      `includes +2 GPUs until ${localTime(expiresAt, NOW)} (temporary)`
    );
    const cpu = document.querySelector("[data-key='requests.cpu']")!;
    expect(cpu.querySelector('.jp-QuotaBar-increase')).toBeNull();
  });

  it('marks a balance the backend could not refresh as stale', () => {
    const stale = summary('team-alpha');
    stale.balance.stale = true;
    stale.balance.observedAt = '2026-12-01T11:55:00Z';
    render(<BalanceView summary={stale} now={NOW} />);
    expect(screen.getByRole('status')).toHaveTextContent('stale · 5 min old');
  });
});
