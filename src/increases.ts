/**
 * Temporary increases in words: `+2 GPUs` for `requests.nvidia.com/gpu: 2`,
 * times in the reader's local time, and which approved increases a
 * namespace's balance includes now and until when. Pure functions, no DOM.
 */

import { describeKey, formatAmount, parseQuantity } from './quantity';
import { IIncrease } from './tokens';

/** One resource of an increase, said plainly, with its exact key for a hover. */
export interface IIncreaseAmount {
  /** `requests.nvidia.com/gpu` */
  key: string;
  /** `+2 GPUs`, `+16 GiB memory limits` */
  text: string;
}

/**
 * The resources of an increase in words, in the balance's order.
 */
export function increaseAmounts(
  resources: IIncrease['resources']
): IIncreaseAmount[] {
  return Object.entries(resources)
    .map(([key, value]) => {
      const info = describeKey(key);
      let amount: string;
      try {
        amount = formatAmount(parseQuantity(value), info.kind);
      } catch {
        amount = String(value); // not a quantity: shown as the server wrote it
      }
      const noun =
        info.kind === 'memory' ||
        info.kind === 'storage' ||
        info.kind === 'count'
          ? ` ${info.label.toLowerCase()}`
          : '';
      const side = info.side === 'limits' ? ' limits' : '';
      return { key, order: info.order, text: `+${amount}${noun}${side}` };
    })
    .sort((a, b) => a.order - b.order)
    .map(({ key, text }) => ({ key, text }));
}

/**
 * An RFC 3339 time in the reader's time zone: `Tue 1 Dec, 18:00`, and the
 * year as well when it is not this year's. The exact string, if it does not
 * parse.
 */
export function localTime(time: string, now: number = Date.now()): string {
  const date = new Date(time);
  if (isNaN(date.getTime())) {
    return time;
  }
  const sameYear = date.getFullYear() === new Date(now).getFullYear();
  const day = date.toLocaleDateString([], {
    weekday: 'short',
    day: 'numeric',
    month: 'short',
    ...(sameYear ? {} : { year: 'numeric' })
  });
  const clock = date.toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit'
  });
  return `${day}, ${clock}`;
}

/**
 * The approved increases of `namespace` that still raise its quota at `now`,
 * soonest to end first.
 */
export function activeIncreases(
  items: IIncrease[],
  namespace: string,
  now: number
): IIncrease[] {
  return items
    .filter(
      item =>
        item.namespace === namespace &&
        item.phase === 'Approved' &&
        !!item.expiresAt &&
        Date.parse(item.expiresAt) > now
    )
    .sort((a, b) => Date.parse(a.expiresAt!) - Date.parse(b.expiresAt!));
}

/**
 * What the balance of one quota key includes of temporary increases: `includes
 * +2 GPUs until Tue 1 Dec, 18:00`, one clause per increase; '' without any.
 */
export function increaseNote(
  active: IIncrease[],
  key: string,
  now: number = Date.now()
): string {
  const parts = active
    .filter(item => key in item.resources)
    .map(item => {
      const amount = increaseAmounts({ [key]: item.resources[key] })[0].text;
      return `${amount} until ${localTime(item.expiresAt!, now)}`;
    });
  return parts.length ? `includes ${parts.join(', ')} (temporary)` : '';
}
