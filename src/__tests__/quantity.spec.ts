import {
  ageSeconds,
  balanceLine,
  balanceLines,
  describeKey,
  formatAge,
  formatAmount,
  formatBytes,
  levelOf,
  parseQuantity
} from '../quantity';

describe('parseQuantity', () => {
  it.each([
    ['2', 2],
    ['500m', 0.5],
    ['1.5', 1.5],
    ['16Gi', 16 * 2 ** 30],
    ['128Gi', 128 * 2 ** 30],
    ['1536Mi', 1536 * 2 ** 20],
    ['1k', 1000],
    ['1M', 1e6],
    ['1G', 1e9],
    ['1E', 1e18],
    ['1e3', 1000],
    ['1.5e-3', 0.0015],
    ['100n', 1e-7],
    ['0', 0],
    ['.5', 0.5]
  ])('%s is %d', (text, value) => {
    expect(parseQuantity(text)).toBeCloseTo(value, 12);
  });

  it('rejects what is not a quantity', () => {
    expect(() => parseQuantity('12 GB')).toThrow(/not a Kubernetes quantity/);
    expect(() => parseQuantity('Gi')).toThrow();
  });
});

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1024, '1 KiB'],
    [1536 * 2 ** 20, '1.5 GiB'],
    [96 * 2 ** 30, '96 GiB'],
    [2 ** 40, '1 TiB'],
    [23.44 * 2 ** 30, '23.4 GiB']
  ])('%d bytes is %s', (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });
});

describe('formatAmount', () => {
  it('says CPUs and GPUs with their unit and plural', () => {
    expect(formatAmount(1, 'cpu')).toBe('1 CPU');
    expect(formatAmount(0.5, 'cpu')).toBe('0.5 CPU');
    expect(formatAmount(8, 'cpu')).toBe('8 CPUs');
    expect(formatAmount(2, 'gpu')).toBe('2 GPUs');
    expect(formatAmount(3, 'count')).toBe('3');
  });
});

describe('describeKey', () => {
  it('names requests and limits apart', () => {
    expect(describeKey('requests.nvidia.com/gpu')).toMatchObject({
      label: 'GPU',
      side: 'requests',
      kind: 'gpu'
    });
    expect(describeKey('limits.memory')).toMatchObject({
      label: 'Memory',
      side: 'limits',
      kind: 'memory'
    });
    expect(describeKey('cpu')).toMatchObject({
      label: 'CPU',
      side: 'requests',
      kind: 'cpu'
    });
    expect(describeKey('pods')).toMatchObject({
      label: 'Pods',
      side: '',
      kind: 'count'
    });
    expect(describeKey('count/jobs.batch')).toMatchObject({
      label: 'Jobs',
      kind: 'count'
    });
    expect(describeKey('requests.example.com/gpu')).toMatchObject({
      label: 'GPU',
      kind: 'gpu'
    });
  });
});

describe('balanceLine', () => {
  it('says what is left in human units', () => {
    const line = balanceLine('limits.memory', {
      hard: '128Gi',
      used: '32Gi',
      remaining: '96Gi'
    });
    expect(line.text).toBe('96 GiB of 128 GiB left');
    expect(line.fractionRemaining).toBe(0.75);
    expect(line.level).toBe('ok');
  });

  it('counts GPUs, CPUs and pods', () => {
    expect(
      balanceLine('requests.nvidia.com/gpu', {
        hard: '2',
        used: '1',
        remaining: '1'
      }).text
    ).toBe('1 of 2 GPUs left');
    expect(
      balanceLine('requests.cpu', {
        hard: '8',
        used: '2500m',
        remaining: '5500m'
      }).text
    ).toBe('5.5 of 8 CPUs left');
    expect(
      balanceLine('pods', { hard: '10', used: '7', remaining: '3' }).text
    ).toBe('3 of 10 pods left');
  });

  it('colours by the share left', () => {
    expect(levelOf(0.5)).toBe('ok');
    expect(levelOf(0.2)).toBe('warn');
    expect(levelOf(0.19)).toBe('low');
    const none = balanceLine('requests.nvidia.com/gpu', {
      hard: '0',
      used: '0',
      remaining: '0'
    });
    expect(none.fractionRemaining).toBe(0);
    expect(none.level).toBe('low');
  });

  it('orders GPU, CPU, memory, counts; requests before limits', () => {
    const keys = balanceLines({
      pods: { hard: '10', used: '0', remaining: '10' },
      'limits.memory': { hard: '1Gi', used: '0', remaining: '1Gi' },
      'requests.memory': { hard: '1Gi', used: '0', remaining: '1Gi' },
      'limits.cpu': { hard: '1', used: '0', remaining: '1' },
      'requests.cpu': { hard: '1', used: '0', remaining: '1' },
      'requests.nvidia.com/gpu': { hard: '1', used: '0', remaining: '1' }
    }).map(l => l.key);
    expect(keys).toEqual([
      'requests.nvidia.com/gpu',
      'requests.cpu',
      'limits.cpu',
      'requests.memory',
      'limits.memory',
      'pods'
    ]);
  });
});

describe('ages', () => {
  it('says a duration briefly', () => {
    expect(formatAge(5.9)).toBe('5 s');
    expect(formatAge(180)).toBe('3 min');
    expect(formatAge(7200)).toBe('2 h');
    expect(formatAge(3 * 86400)).toBe('3 d');
  });

  it('measures from an RFC 3339 time', () => {
    const now = Date.parse('2026-01-01T00:01:00Z');
    expect(ageSeconds('2026-01-01T00:00:00Z', now)).toBe(60);
    expect(ageSeconds('not a time', now)).toBe(0);
    expect(ageSeconds(null, now)).toBe(0);
  });
});
