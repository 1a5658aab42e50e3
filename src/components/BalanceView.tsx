/**
 * One namespace's balance: its bars (GPU, CPU, memory, counts; requests and
 * limits apart) with the temporary increases they include and until when,
 * the quota keys Kubernetes does not enforce, and the age of the data,
 * marked stale when the backend could not refresh it.
 */

import * as React from 'react';

import { activeIncreases, increaseNote } from '../increases';
import { ageSeconds, balanceLines, formatAge } from '../quantity';
import { IIncrease, INamespaceSummary } from '../tokens';
import { ResourceBar } from './ResourceBar';

export interface IBalanceViewProps {
  summary: INamespaceSummary;
  now: number;
  /** The increase requests the sidebar read: the approved ones raise this balance. */
  increases?: IIncrease[];
}

export function BalanceView(props: IBalanceViewProps): JSX.Element {
  const { summary, now } = props;
  const balance = summary.balance;
  const headingId = `jp-QuotaSidebar-ns-${summary.name}`;
  const lines = balanceLines(balance.resources);
  const age = formatAge(ageSeconds(balance.observedAt, now));
  const warnings = balance.warnings ?? [];
  const active = activeIncreases(props.increases ?? [], summary.name, now);

  React.useEffect(() => {
    Private.markFirstBalance();
  }, []);

  return (
    <section
      className="jp-QuotaSidebar-namespace"
      aria-labelledby={headingId}
      data-namespace={summary.name}
    >
      <div className="jp-QuotaSidebar-namespaceHead">
        <h3 id={headingId}>
          {summary.name}
          <span className="jp-QuotaSidebar-team"> team {summary.team}</span>
        </h3>
        {balance.stale ? (
          <span
            className="jp-QuotaSidebar-stale"
            role="status"
            title={`Read ${balance.observedAt}; the backend could not refresh it since.`}
          >
            stale · {age} old
          </span>
        ) : (
          <span
            className="jp-QuotaSidebar-age"
            title={`Read ${balance.observedAt}`}
          >
            as of {age} ago
          </span>
        )}
      </div>
      {lines.length === 0 ? (
        <p className="jp-QuotaSidebar-empty">No quota limits this namespace.</p>
      ) : (
        lines.map(line => (
          <ResourceBar
            key={line.key}
            namespace={summary.name}
            line={line}
            raw={balance.resources[line.key]}
            note={increaseNote(active, line.key, now)}
          />
        ))
      )}
      {warnings.length > 0 && (
        <ul
          className="jp-QuotaSidebar-warnings"
          aria-label={`Quota warnings for ${summary.name}`}
        >
          {warnings.map(w => (
            <li key={w.resource} data-resource={w.resource}>
              <strong>{w.resource}</strong>: {w.message}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

namespace Private {
  let marked = false;

  /**
   * Record when the first balance is drawn (`performance` mark
   * `jupyter-quota:first-balance`), to measure the time from page load.
   */
  export function markFirstBalance(): void {
    if (marked || typeof performance?.mark !== 'function') {
      return;
    }
    marked = true;
    performance.mark('jupyter-quota:first-balance');
  }
}
