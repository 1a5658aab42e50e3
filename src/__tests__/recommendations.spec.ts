import {
  appliedProfile,
  capacityLine,
  capacityPoints,
  demandPoints,
  duration,
  inUnits
} from '../recommendations';
import { ICapacityCurve, IProfile, IRecommendation } from '../tokens';

describe('duration', () => {
  it.each([
    [null, '–'],
    [30, '30 s'],
    [2700, '45 m'],
    [7200, '2 h'],
    [7800, '2 h 10 m'],
    [86400 * 3 + 3600 * 4, '3 d 4 h'],
    [86400 * 2, '2 d']
  ])('says %p seconds as %p, as the explanation does', (seconds, words) => {
    expect(duration(seconds as number | null)).toBe(words);
  });
});

describe('inUnits', () => {
  it.each([
    ['3', 'GPUs', 3],
    ['2500m', 'cores', 2.5],
    ['64Gi', 'GiB', 64],
    [null, 'GPUs', null],
    ['lots', 'GPUs', null]
  ])('reads %p in %s as %p', (quantity, unit, value) => {
    expect(inUnits(quantity as string | null, unit)).toBe(value);
  });
});

it("a series' points start at since and step by step seconds", () => {
  const points = demandPoints({
    since: '2026-11-30T00:00:00Z',
    step: 3600,
    unit: 'GPUs',
    quota: 2,
    demand: [1, 3],
    held: [1, 2]
  });
  expect(points).toEqual([
    { start: Date.parse('2026-11-30T00:00:00Z'), demand: 1, held: 1, quota: 2 },
    { start: Date.parse('2026-11-30T01:00:00Z'), demand: 3, held: 2, quota: 2 }
  ]);
});

it("Apply keeps the rest of the profile and sets only the row's key", () => {
  const stored = {
    team: 'alpha',
    namespace: 'team-alpha',
    users: ['ann'],
    hard: { 'requests.nvidia.com/gpu': '2', 'requests.cpu': '8' }
  } as IProfile;
  const row = {
    team: 'alpha',
    resource: 'requests.cpu',
    recommended: '12'
  } as IRecommendation;
  expect(appliedProfile(stored, row)).toEqual({
    ...stored,
    hard: { 'requests.nvidia.com/gpu': '2', 'requests.cpu': '12' }
  });
  expect(stored.hard!['requests.cpu']).toBe('8');
  expect(appliedProfile({ team: 'new' } as IProfile, row).hard).toEqual({
    'requests.cpu': '12'
  });
});

describe('the capacity curve', () => {
  const curve: ICapacityCurve = {
    currency: null,
    waitTargetSeconds: 3600,
    gpusForWaitTarget: null,
    points: [
      {
        gpus: 8,
        worstWaitP90Seconds: 5400,
        refused: 0,
        waiting: 0,
        utilization: null,
        cost: null
      },
      {
        gpus: 4,
        worstWaitP90Seconds: 18000,
        refused: 2,
        waiting: 0,
        utilization: null,
        cost: null
      }
    ]
  };

  it('says when no size tried meets the target', () => {
    expect(capacityLine(curve)).toBe(
      "No cluster size tried keeps every team's p90 wait within 1 h."
    );
  });

  it('orders the points by GPUs, waits in hours', () => {
    expect(capacityPoints(curve)).toEqual([
      { gpus: 4, waitHours: 5, cost: null },
      { gpus: 8, waitHours: 1.5, cost: null }
    ]);
  });

  it("says how many jobs the teams' quotas still refuse at the size it names", () => {
    expect(capacityLine({ ...curve, gpusForWaitTarget: 4 })).toBe(
      "4 GPUs keep every team's p90 wait within 1 h. 2 jobs are still refused there by their teams' quotas, which more GPUs do not change."
    );
    const everywhere = {
      ...curve,
      points: curve.points.map(p => ({ ...p, refused: p.refused + 1 }))
    };
    expect(capacityLine(everywhere)).toBe(
      "No cluster size tried keeps every team's p90 wait within 1 h. At every size tried, at least 1 job is refused by their teams' quotas."
    );
  });

  it('names the fewest GPUs that meet it, without a price when none is set', () => {
    expect(capacityLine({ ...curve, gpusForWaitTarget: 8 })).toBe(
      "8 GPUs keep every team's p90 wait within 1 h."
    );
  });
});
