/**
 * Every team's balance as tables, for the admin view: one table per
 * namespace, one row per quota key with what is used, the hard limit (with
 * the temporary increases it includes) and what is left, in the sidebar's
 * words and units.
 */

import * as React from 'react';

import { activeIncreases, increaseNote } from '../increases';
import {
  ageSeconds,
  balanceLines,
  formatAge,
  formatAmount,
  GLOSSARY
} from '../quantity';
import { IIncrease, INamespaceSummary } from '../tokens';

export interface ITeamBalancesProps {
  namespaces: INamespaceSummary[];
  now: number;
  /** Every team's increase requests: the approved ones raise the hard limits shown. */
  increases?: IIncrease[];
}

export function TeamBalances(props: ITeamBalancesProps): JSX.Element {
  if (props.namespaces.length === 0) {
    return <p className="jp-QuotaSidebar-empty">No team is configured.</p>;
  }
  return (
    <>
      {props.namespaces.map(ns => (
        <TeamBalance
          key={ns.name}
          summary={ns}
          now={props.now}
          increases={props.increases ?? []}
        />
      ))}
    </>
  );
}

function TeamBalance(props: {
  summary: INamespaceSummary;
  now: number;
  increases: IIncrease[];
}): JSX.Element {
  const { summary, now } = props;
  const active = activeIncreases(props.increases, summary.name, now);
  const balance = summary.balance;
  const lines = balanceLines(balance.resources);
  const age = formatAge(ageSeconds(balance.observedAt, now));
  return (
    <table
      className="jp-Quota-balanceTable jp-QuotaAdmin-balance"
      data-namespace={summary.name}
      aria-label={`Balance of ${summary.name}`}
    >
      <caption>
        {summary.name}
        <span className="jp-QuotaSidebar-team"> team {summary.team}</span>
        {balance.stale ? (
          <span
            className="jp-QuotaSidebar-stale"
            title={`Read ${balance.observedAt}; the backend could not refresh it since.`}
          >
            {' '}
            stale · {age} old
          </span>
        ) : null}
        {summary.profileError ? (
          <span
            className="jp-QuotaSidebar-error jp-QuotaAdmin-profileError"
            role="alert"
          >
            {' '}
            Profile problem: {summary.profileError}
          </span>
        ) : null}
      </caption>
      <thead>
        <tr>
          <th scope="col">Resource</th>
          <th scope="col" className="jp-Quota-quantity">
            Used
          </th>
          <th
            scope="col"
            className="jp-Quota-quantity"
            title={GLOSSARY.hard.title}
          >
            Allowed
          </th>
          <th scope="col" className="jp-Quota-quantity">
            Left
          </th>
        </tr>
      </thead>
      <tbody>
        {lines.length === 0 ? (
          <tr>
            <td colSpan={4} className="jp-QuotaSidebar-empty">
              No quota limits this namespace.
            </td>
          </tr>
        ) : (
          lines.map(line => {
            const raw = balance.resources[line.key];
            const note = increaseNote(active, line.key, now);
            return (
              <tr
                key={line.key}
                className={`jp-mod-${line.level}`}
                data-key={line.key}
                data-hard={raw.hard}
                data-used={raw.used}
                data-remaining={raw.remaining}
                title={`${line.key}: hard ${raw.hard}, used ${raw.used}, remaining ${raw.remaining}`}
              >
                <th scope="row">
                  {line.label}
                  {line.side && (
                    <>
                      {' '}
                      <span
                        className="jp-QuotaBar-side"
                        title={GLOSSARY[line.side].title}
                      >
                        {GLOSSARY[line.side].word}
                      </span>
                    </>
                  )}
                  {note && <div className="jp-QuotaBar-increase">{note}</div>}
                </th>
                <td className="jp-Quota-quantity">
                  {formatAmount(line.used, line.kind)}
                </td>
                <td className="jp-Quota-quantity">
                  {formatAmount(line.hard, line.kind)}
                </td>
                <td className="jp-Quota-quantity">
                  {formatAmount(line.remaining, line.kind)}
                </td>
              </tr>
            );
          })
        )}
      </tbody>
    </table>
  );
}
