import {
  activeIncreases,
  increaseAmounts,
  increaseNote,
  localTime
} from '../increases';
import { increase as asked } from './components/fixtures';

const NOW = Date.parse('2026-12-01T12:00:00Z');

/** An approved increase (the fixtures' default is Pending). */
const increase: typeof asked = fields =>
  asked({ phase: 'Approved', expiresAt: '2026-12-01T18:00:00Z', ...fields });

describe('increaseAmounts', () => {
  it('says each resource in words, GPUs first, and keeps its key', () => {
    expect(
      increaseAmounts({
        'limits.memory': '16Gi',
        'requests.cpu': '4',
        'requests.nvidia.com/gpu': '1'
      })
    ).toEqual([
      { key: 'requests.nvidia.com/gpu', text: '+1 GPU' },
      { key: 'requests.cpu', text: '+4 CPUs' },
      { key: 'limits.memory', text: '+16 GiB memory limits' }
    ]);
  });

  it('shows a value that is not a quantity as written', () => {
    expect(increaseAmounts({ 'requests.nvidia.com/gpu': 'two' })).toEqual([
      { key: 'requests.nvidia.com/gpu', text: '+two' }
    ]);
  });
});

describe('localTime', () => {
  it('names the day and time in the local zone, the year only when it is not this one', () => {
    const text = localTime('2026-12-01T18:00:00Z', NOW);
    const local = new Date('2026-12-01T18:00:00Z');
    expect(text).toContain(
      local.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    );
    expect(text).not.toContain('2026');
    expect(localTime('2025-12-01T18:00:00Z', NOW)).toContain('2025');
    expect(localTime('not a time', NOW)).toBe('not a time');
  });
});

describe('activeIncreases and increaseNote', () => {
  it("keeps the namespace's approved increases that have not ended, soonest first", () => {
    const items = [
      increase({ name: 'late', expiresAt: '2026-12-02T00:00:00Z' }),
      increase({ name: 'soon' }),
      increase({ name: 'ended', expiresAt: '2026-12-01T11:00:00Z' }),
      increase({ name: 'pending', phase: 'Pending', expiresAt: null }),
      increase({ name: 'other', namespace: 'team-beta' })
    ];
    expect(activeIncreases(items, 'team-alpha', NOW).map(i => i.name)).toEqual([
      'soon',
      'late'
    ]);
  });

  it('says what one key of the balance includes, and nothing for another key', () => {
    const active = [increase({})];
    expect(increaseNote(active, 'requests.nvidia.com/gpu', NOW)).toBe(
      `includes +2 GPUs until ${localTime('2026-12-01T18:00:00Z', NOW)} (temporary)`
    );
    expect(increaseNote(active, 'requests.cpu', NOW)).toBe('');
  });
});
