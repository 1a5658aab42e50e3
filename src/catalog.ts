/**
 * Model ids the planner form offers as the user types: the server's catalog
 * (`GET models`), or, from a server without that route, a static list of
 * popular hub ids. Any other hub id or a local folder with a `config.json`
 * may still be typed.
 */

import { IModelInfo } from './tokens';

/** One `<option>` of the model picker. */
export interface IModelSuggestion {
  value: string;
  label: string;
}

/**
 * The picker's options: the server's catalog with each model's size (and
 * `MoE`, `vision` where they apply), or the static list when the server gave
 * none.
 */
export function modelSuggestions(
  models: readonly IModelInfo[] | null
): IModelSuggestion[] {
  if (!models || models.length === 0) {
    return MODEL_SUGGESTIONS.map(value => ({ value, label: '' }));
  }
  return models.map(m => {
    const tags = [`${formatParams(m.params)} parameters`];
    if (m.experts) {
      tags.push(`MoE, ${m.experts} experts`);
    }
    if (m.vision) {
      tags.push('vision');
    }
    return { value: m.id, label: tags.join(', ') };
  });
}

/** 7615616512 -> "7.6B", 494032768 -> "494M". */
export function formatParams(count: number): string {
  if (count >= 1e9) {
    return `${(count / 1e9).toFixed(count >= 1e11 ? 0 : 1)}B`;
  }
  return `${Math.round(count / 1e6)}M`;
}

export const MODEL_SUGGESTIONS: readonly string[] = [
  'Qwen/Qwen2.5-0.5B-Instruct',
  'Qwen/Qwen2.5-1.5B-Instruct',
  'Qwen/Qwen2.5-3B-Instruct',
  'Qwen/Qwen2.5-7B-Instruct',
  'Qwen/Qwen2.5-14B-Instruct',
  'Qwen/Qwen2.5-32B-Instruct',
  'Qwen/Qwen2.5-72B-Instruct',
  'Qwen/Qwen3-0.6B',
  'Qwen/Qwen3-1.7B',
  'Qwen/Qwen3-4B',
  'Qwen/Qwen3-8B',
  'Qwen/Qwen3-14B',
  'Qwen/Qwen3-32B',
  'Qwen/Qwen3-30B-A3B',
  'Qwen/Qwen2.5-VL-7B-Instruct',
  'Qwen/Qwen-VL-Chat',
  'meta-llama/Llama-3.2-1B-Instruct',
  'meta-llama/Llama-3.2-3B-Instruct',
  'meta-llama/Llama-3.1-8B-Instruct',
  'meta-llama/Llama-3.3-70B-Instruct',
  'mistralai/Mistral-7B-Instruct-v0.3',
  'google/gemma-2-2b-it',
  'google/gemma-2-9b-it',
  'THUDM/glm-4-9b-chat',
  'internlm/internlm2_5-7b-chat',
  'deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B',
  'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B',
  'deepseek-ai/DeepSeek-R1-Distill-Llama-8B'
];
