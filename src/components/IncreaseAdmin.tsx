/**
 * The admin's side of temporary increases: the requests of every team, with
 * Approve and Deny (and a comment) on the Pending ones, and the audit log
 * with a CSV download.
 */

import * as React from 'react';

import { localTime } from '../increases';
import { QuotaModel } from '../model';
import { IAuditLog, IIncrease } from '../tokens';
import { useLoad } from './hooks';
import { IIncreaseClient, IIncreases, IncreaseList } from './Increases';
import { Outcome, TaskError, useTask } from './task';

export interface IIncreaseAdminClient extends IIncreaseClient {
  decideIncrease(
    name: string,
    approve: boolean,
    comment: string
  ): Promise<IIncrease>;
  audit(): Promise<IAuditLog>;
  auditCsvUrl(): string;
}

export function IncreaseRequests(props: {
  model: QuotaModel;
  client: IIncreaseAdminClient;
  /** The admin view's `useIncreases`: the balances read the same list. */
  increases: IIncreases;
}): JSX.Element {
  const { model, client } = props;
  const { items, error, reload } = props.increases;
  const [comments, setComments] = React.useState<Record<string, string>>({});
  const [status, setStatus] = React.useState('');
  const deciding = useTask(async (item: IIncrease, approve: boolean) => {
    const decided = await client.decideIncrease(
      item.name,
      approve,
      comments[item.name] ?? ''
    );
    setStatus(`${decided.name} is ${decided.phase}.`);
    reload();
    void model.refresh(); // the raised (or unchanged) balances
  });
  const decide = (item: IIncrease, approve: boolean) => {
    setStatus('');
    void deciding.run(item, approve);
  };

  const pending = items.filter(item => item.phase === 'Pending');
  const decided = items.filter(item => item.phase !== 'Pending');
  return (
    <>
      <Outcome status={status} failure={deciding.error} />
      <IncreaseList
        items={pending}
        error={error}
        onRetry={reload}
        label="Pending requests"
        actions={item => (
          <div className="jp-QuotaIncrease-actions">
            {item.warnings?.length ? (
              <ul
                className="jp-QuotaSidebar-warnings"
                aria-label={`Warnings on ${item.name}`}
              >
                {item.warnings.map(warning => (
                  <li key={warning}>{warning}</li>
                ))}
              </ul>
            ) : null}
            <input
              type="text"
              aria-label={`Comment on ${item.name}`}
              placeholder="Comment"
              value={comments[item.name] ?? ''}
              onChange={e =>
                setComments({ ...comments, [item.name]: e.target.value })
              }
            />
            <button
              className="jp-mod-styled jp-mod-accept"
              aria-label={`Approve ${item.name}`}
              disabled={deciding.busy}
              onClick={() => decide(item, true)}
            >
              Approve
            </button>
            <button
              className="jp-mod-styled jp-mod-warn"
              aria-label={`Deny ${item.name}`}
              disabled={deciding.busy}
              onClick={() => decide(item, false)}
            >
              Deny
            </button>
          </div>
        )}
      />
      <h3>Decided</h3>
      <IncreaseList items={decided} error="" label="Decided requests" />
    </>
  );
}

export function AuditLog(props: {
  model: QuotaModel;
  client: IIncreaseAdminClient;
}): JSX.Element {
  const { model, client } = props;
  const log = useLoad(() => client.audit(), [client, model.generation]);
  const entries = log.value?.entries ?? [];
  return (
    <>
      <a
        className="jp-QuotaAudit-export"
        href={client.auditCsvUrl()}
        download="quota-audit.csv"
      >
        Export CSV
      </a>
      <TaskError
        error={log.error}
        prefix="Could not read the audit log: "
        onRetry={log.retry}
        retryLabel="Read the audit log again"
      />
      <table className="jp-QuotaAudit-table" aria-label="Audit log">
        <thead>
          <tr>
            <th scope="col">When, who</th>
            <th scope="col">What</th>
          </tr>
        </thead>
        <tbody>
          {entries.map(entry => (
            <tr key={entry.id} data-action={entry.action}>
              <td>
                <time dateTime={entry.at} title={entry.at}>
                  {localTime(entry.at)}
                </time>
                <br />
                {entry.who}
              </td>
              <td>
                <strong>{entry.action}</strong> {entry.target}
                {entry.detail ? (
                  <div className="jp-QuotaAudit-detail">{entry.detail}</div>
                ) : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
