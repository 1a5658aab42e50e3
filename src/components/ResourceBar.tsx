/**
 * One quota key as a bar: label, `96 GiB of 128 GiB left`, a meter filled by
 * the share left and coloured by it, the used and allowed (hard) amounts, and
 * the temporary increases the allowed amount includes.
 */

import * as React from 'react';

import { formatAmount, GLOSSARY, IBalanceLine } from '../quantity';
import { IResourceBalance } from '../tokens';

export interface IResourceBarProps {
  namespace: string;
  line: IBalanceLine;
  /** The API's own strings, kept on the element for tests and tooltips. */
  raw: IResourceBalance;
  /** What the hard limit includes of temporary increases ('' for none). */
  note?: string;
}

export function ResourceBar(props: IResourceBarProps): JSX.Element {
  const { line, raw, namespace } = props;
  const name = line.side ? `${line.label} ${line.side}` : line.label;
  const percent = Math.round(line.fractionRemaining * 1000) / 10;
  const used =
    line.kind === 'count'
      ? String(line.used)
      : formatAmount(line.used, line.kind);
  const hard =
    line.kind === 'count'
      ? String(line.hard)
      : formatAmount(line.hard, line.kind);
  return (
    <div
      className={`jp-QuotaBar jp-mod-${line.level}`}
      data-key={line.key}
      data-hard={raw.hard}
      data-used={raw.used}
      data-remaining={raw.remaining}
      title={`${line.key}: hard ${raw.hard}, used ${raw.used}, remaining ${raw.remaining}`}
    >
      <div className="jp-QuotaBar-head">
        <span className="jp-QuotaBar-label">
          {line.label}
          {line.side && (
            <>
              {' '}
              <span
                className="jp-QuotaBar-side"
                title={`${line.key}: ${GLOSSARY[line.side].title}`}
              >
                {GLOSSARY[line.side].word}
              </span>
            </>
          )}
        </span>
        <span className="jp-QuotaBar-text">{line.text}</span>
      </div>
      <div
        className="jp-QuotaBar-track"
        role="meter"
        aria-label={`${name} left in ${namespace}`}
        aria-valuemin={0}
        aria-valuemax={line.hard}
        aria-valuenow={line.remaining}
        aria-valuetext={line.text}
      >
        <div className="jp-QuotaBar-fill" style={{ width: `${percent}%` }} />
      </div>
      <div className="jp-QuotaBar-detail">
        {used} used ·{' '}
        <span className="jp-QuotaBar-hard" title={GLOSSARY.hard.title}>
          {hard} {GLOSSARY.hard.word}
        </span>
      </div>
      {props.note && (
        <div className="jp-QuotaBar-increase" title={`${line.key}`}>
          {props.note}
        </div>
      )}
    </div>
  );
}
