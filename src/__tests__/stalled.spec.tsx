import * as React from 'react';
import { renderToStaticMarkup } from 'react-dom/server';

import { StalledFlag } from '../components/StalledFlag';
import { stalledJobs, stalledText } from '../stalled';
import { IJob, IStalled } from '../tokens';

const NOW = Date.parse('2026-11-30T16:30:00Z');

function job(name: string, stalled?: IStalled | null): IJob {
  return {
    name,
    namespace: 'team-alpha',
    owner: 'ana',
    phase: 'Running',
    args: [],
    gpus: 1,
    resources: { requests: {}, limits: {} },
    createdAt: '2026-11-30T15:00:00Z',
    ...(stalled === undefined ? {} : { stalled })
  } as IJob;
}

const noLogs: IStalled = {
  since: '2026-11-30T16:05:00Z',
  reason: 'NoLogProgress',
  message: 'no new log line for 20 minutes'
};

describe('the zombie flag', () => {
  it('says how long and why a job is stalled', () => {
    expect(stalledText(noLogs, NOW)).toBe('Stalled 25 min: no log progress');
    expect(
      stalledText(
        {
          since: '2026-11-30T14:00:00Z',
          reason: 'LowGpuUtilization',
          message: ''
        },
        NOW
      )
    ).toBe('Stalled 2 h: GPU utilisation low');
  });

  it('renders the flag with the reason and the service’s message', () => {
    const html = renderToStaticMarkup(
      <StalledFlag job={job('sft-1', noLogs)} now={NOW} />
    );
    expect(html).toBe(
      '<p class="jp-QuotaJob-stalled" data-reason="NoLogProgress" ' +
        'title="Flagged since 2026-11-30T16:05:00Z">' +
        '<span class="jp-QuotaJob-stalledBadge">Zombie?</span> ' +
        'Stalled 25 min: no log progress (no new log line for 20 minutes)</p>'
    );
  });

  it('renders nothing for a job without the flag or with a null one', () => {
    expect(renderToStaticMarkup(<StalledFlag job={job('a')} now={NOW} />)).toBe(
      ''
    );
    expect(
      renderToStaticMarkup(<StalledFlag job={job('b', null)} now={NOW} />)
    ).toBe('');
  });

  it('lists the flagged jobs, the longest stalled first', () => {
    const older = { ...noLogs, since: '2026-11-30T15:00:00Z' };
    const jobs = [job('a'), job('b', noLogs), job('c', older), job('d', null)];
    expect(stalledJobs(jobs).map(j => j.name)).toEqual(['c', 'b']);
  });
});
