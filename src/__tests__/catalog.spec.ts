import { formatParams, MODEL_SUGGESTIONS, modelSuggestions } from '../catalog';

describe('modelSuggestions', () => {
  it('offers the server catalog with sizes, MoE and vision tags', () => {
    const options = modelSuggestions([
      {
        id: 'Qwen/Qwen2.5-7B-Instruct',
        params: 7615616512,
        experts: 0,
        vision: false
      },
      {
        id: 'Qwen/Qwen3-30B-A3B',
        params: 30532122624,
        experts: 128,
        vision: false
      },
      { id: 'Qwen/Qwen-VL-Chat', params: 9656846336, experts: 0, vision: true }
    ]);
    expect(options).toEqual([
      { value: 'Qwen/Qwen2.5-7B-Instruct', label: '7.6B parameters' },
      {
        value: 'Qwen/Qwen3-30B-A3B',
        label: '30.5B parameters, MoE, 128 experts'
      },
      { value: 'Qwen/Qwen-VL-Chat', label: '9.7B parameters, vision' }
    ]);
  });

  it('falls back to the static list when the server gave none', () => {
    for (const answer of [null, []]) {
      const options = modelSuggestions(answer);
      expect(options.map(o => o.value)).toEqual([...MODEL_SUGGESTIONS]);
      expect(options.every(o => o.label === '')).toBe(true);
    }
  });

  it('formats parameter counts', () => {
    expect(formatParams(494032768)).toBe('494M');
    expect(formatParams(1543714304)).toBe('1.5B');
    expect(formatParams(235093634560)).toBe('235B');
  });
});
