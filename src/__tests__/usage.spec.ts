import {
  chargebackCsvUrl,
  chargebackLines,
  axisTicks,
  formatHours,
  chargebackPath,
  isMonth,
  monthOf,
  shareText,
  USAGE_RANGES,
  usagePath,
  usageQuery,
  usageSeries,
  usageShare,
  usageTotals
} from '../usage';
import { IUsage, IUsageRow } from '../tokens';

const [DAY_RANGE, WEEK_RANGE] = USAGE_RANGES;
const NOW = Date.parse('2026-11-30T16:25:41.500Z');

function row(overrides: Partial<IUsageRow>): IUsageRow {
  return {
    namespace: 'team-alpha',
    team: 'alpha',
    gpuSeconds: 0,
    cpuSeconds: 0,
    memoryGibSeconds: 0,
    cost: null,
    ...overrides
  };
}

function answer(rows: IUsageRow[], step: number | null = 3600): IUsage {
  return {
    since: '2026-11-29T16:00:00Z',
    until: '2026-11-30T16:25:41Z',
    by: 'user',
    step,
    rows,
    totals: { gpuSeconds: 0, cpuSeconds: 0, memoryGibSeconds: 0, cost: null },
    prices: null
  };
}

describe('usageQuery and usagePath', () => {
  it('starts the window on a whole step and ends it now', () => {
    expect(
      usageQuery(DAY_RANGE, NOW, 'user', { namespace: 'team-alpha' })
    ).toEqual({
      since: '2026-11-29T16:00:00Z',
      until: '2026-11-30T16:25:41Z',
      by: 'user',
      step: 3600,
      namespace: 'team-alpha'
    });
    const week = usageQuery(WEEK_RANGE, NOW, 'team', { totals: true });
    expect(week).toEqual({
      since: '2026-11-23T12:00:00Z',
      until: '2026-11-30T16:25:41Z',
      by: 'team'
    });
  });

  it('writes the route with its parameters encoded', () => {
    expect(
      usagePath(usageQuery(DAY_RANGE, NOW, 'user', { namespace: 'team a' }))
    ).toBe(
      'usage?since=2026-11-29T16%3A00%3A00Z&until=2026-11-30T16%3A25%3A41Z' +
        '&by=user&step=3600&namespace=team+a'
    );
    expect(
      usagePath(usageQuery(WEEK_RANGE, NOW, 'team', { totals: true }))
    ).toBe(
      'usage?since=2026-11-23T12%3A00%3A00Z&until=2026-11-30T16%3A25%3A41Z&by=team'
    );
  });
});

describe('usageSeries', () => {
  it('fills every bucket of the window and splits the caller from the others', () => {
    const points = usageSeries(
      answer([
        row({ user: 'ana', start: '2026-11-29T16:00:00Z', gpuSeconds: 7200 }),
        row({ user: 'bo', start: '2026-11-29T16:00:00Z', gpuSeconds: 1800 }),
        row({ user: 'bo', start: '2026-11-30T16:00:00Z', gpuSeconds: 900 }),
        row({ user: 'ana', start: '2026-11-30T03:00:00Z', cpuSeconds: 36000 })
      ]),
      'gpuSeconds',
      'ana'
    );
    // 16:00 yesterday to 16:25 today: 24 whole hours and the hour in progress.
    expect(points).toHaveLength(25);
    expect(points[0]).toEqual({
      start: Date.parse('2026-11-29T16:00:00Z'),
      mine: 2,
      others: 0.5
    });
    expect(points[24]).toEqual({
      start: Date.parse('2026-11-30T16:00:00Z'),
      mine: 0,
      others: 0.25
    });
    // The CPU row counts nothing in a GPU chart; no hour is lost or invented.
    expect(points.reduce((sum, p) => sum + p.mine + p.others, 0)).toBe(2.75);
  });

  it('puts a row in the bucket its start falls in, and drops rows outside the window', () => {
    const points = usageSeries(
      answer([
        row({ user: 'ana', start: '2026-11-29T18:30:00Z', gpuSeconds: 3600 }),
        row({ user: 'ana', start: '2026-11-28T10:00:00Z', gpuSeconds: 3600 })
      ]),
      'gpuSeconds',
      'ana'
    );
    expect(points[2].mine).toBe(1);
    expect(points.reduce((sum, p) => sum + p.mine, 0)).toBe(1);
  });

  it('has no points for an answer without buckets', () => {
    expect(
      usageSeries(answer([row({ user: 'ana' })], null), 'gpuSeconds', 'ana')
    ).toEqual([]);
  });
});

describe('usageShare and shareText', () => {
  it('says the caller’s hours out of the namespace’s', () => {
    const share = usageShare(
      [
        row({ user: 'ana', memoryGibSeconds: 3600 * 16 }),
        row({ user: 'bo', memoryGibSeconds: 3600 * 48 })
      ],
      'memoryGibSeconds',
      'ana'
    );
    expect(share).toEqual({ mine: 16, total: 64, fraction: 0.25 });
    expect(shareText(share, 'Memory GiB-hours')).toBe(
      'You: 16 of 64 Memory GiB-hours (25%)'
    );
  });

  it('says when nothing was used', () => {
    const share = usageShare([], 'gpuSeconds', 'ana');
    expect(share.fraction).toBeNull();
    expect(shareText(share, 'GPU-hours')).toBe(
      'No GPU-hours used in this range.'
    );
  });
});

describe('usageTotals', () => {
  it('sums a user’s rows across namespaces and ranks the heaviest first', () => {
    const totals = usageTotals(
      [
        row({ user: 'bo', gpuSeconds: 3600, cost: 2.5 }),
        row({
          user: 'ana',
          namespace: 'team-beta',
          team: 'beta',
          gpuSeconds: 3600,
          cost: 1
        }),
        row({ user: 'ana', gpuSeconds: 7200, cpuSeconds: 1800, cost: 5 }),
        row({ user: 'cy', cpuSeconds: 3600 })
      ],
      'user'
    );
    expect(totals.map(t => [t.key, t.gpuHours, t.cpuHours, t.cost])).toEqual([
      ['ana', 3, 0.5, 6],
      ['bo', 1, 0, 2.5],
      ['cy', 0, 1, null]
    ]);
    expect(totals[0].detail).toBe('team-alpha, team-beta');
  });

  it('keys team rows by namespace with the team as detail', () => {
    const totals = usageTotals(
      [row({ gpuSeconds: 60 }), row({ namespace: 'team-beta', team: 'beta' })],
      'namespace'
    );
    expect(totals.map(t => [t.key, t.detail])).toEqual([
      ['team-alpha', 'alpha'],
      ['team-beta', 'beta']
    ]);
  });
});

describe('the chargeback link', () => {
  it('asks for the month as CSV under the server’s base URL', () => {
    expect(chargebackPath('2026-11')).toBe('chargeback?month=2026-11');
    expect(chargebackCsvUrl('http://127.0.0.1:8888/user/ana/', '2026-11')).toBe(
      'http://127.0.0.1:8888/user/ana/quota/v1/chargeback?month=2026-11&format=csv'
    );
    expect(chargebackCsvUrl('http://h/lab', '2026-01')).toBe(
      'http://h/lab/quota/v1/chargeback?month=2026-01&format=csv'
    );
  });

  it('takes only a month the route accepts, the current UTC one first', () => {
    expect(isMonth('2026-11')).toBe(true);
    expect(isMonth('2026-13')).toBe(false);
    expect(isMonth('2026-1')).toBe(false);
    expect(isMonth('')).toBe(false);
    expect(monthOf(Date.parse('2026-12-01T00:30:00+01:00'))).toBe('2026-11');
  });
});

describe('chargebackLines', () => {
  it('keys each team row by namespace and keeps the totals row as it came', () => {
    const figures = {
      gpuHours: 2,
      gpuCost: 5,
      cpuHours: 10,
      cpuCost: 0.4,
      memoryGibHours: 64,
      memoryCost: 0.32,
      cost: 5.72
    };
    const lines = chargebackLines({
      month: '2026-11',
      since: '2026-11-01T00:00:00Z',
      until: '2026-12-01T00:00:00Z',
      prices: {
        currency: 'EUR',
        gpuHour: 2.5,
        cpuHour: 0.04,
        memoryGibHour: 0.005
      },
      rows: [{ namespace: 'team-alpha', team: 'alpha', ...figures }],
      totals: figures
    });
    expect(lines.rows).toEqual([
      {
        key: 'team-alpha',
        detail: 'team alpha',
        gpuHours: 2,
        cpuHours: 10,
        memoryGibHours: 64,
        cost: 5.72
      }
    ]);
    expect(lines.total).toMatchObject({ key: 'Total', cost: 5.72 });
  });
});

describe('formatHours', () => {
  it('keeps three significant digits, or the whole hour', () => {
    expect(
      [0, 0.004, 0.25, 4.917, 17.16, 611.13, 20090.18].map(formatHours)
    ).toEqual(['0', '<0.01', '0.25', '4.92', '17.2', '611', '20090']);
  });
});

describe('axisTicks', () => {
  it.each([0.004, 0.02, 0.7, 5.91, 17, 611, 0])(
    'gives %p distinct labels on round ticks from 0 past the top',
    max => {
      const { ticks, label } = axisTicks(max);
      const labels = ticks.map(label);
      expect(new Set(labels).size).toBe(labels.length);
      expect(ticks[0]).toBe(0);
      expect(ticks[ticks.length - 1]).toBeGreaterThanOrEqual(max);
      expect(ticks.length).toBeGreaterThanOrEqual(3);
      expect(ticks.length).toBeLessThanOrEqual(6);
    }
  );

  it('labels a small range by its step, never "<0.01" twice', () => {
    const { ticks, label } = axisTicks(0.02);
    expect(ticks.map(label)).toEqual(['0', '0.005', '0.01', '0.015', '0.02']);
  });
});
