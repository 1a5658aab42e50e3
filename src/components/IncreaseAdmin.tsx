/**
 * The admin's side of temporary increases: the requests of every team, with
 * Approve and Deny (and a comment) on the Pending ones, and the audit log
 * with a CSV download.
 */

import * as React from 'react';

import { QuotaModel } from '../model';
import { IAuditEntry, IAuditLog, IIncrease } from '../tokens';
import {
  IIncreaseClient,
  IncreaseList,
  Outcome,
  useIncreases
} from './Increases';

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
}): JSX.Element {
  const { model, client } = props;
  const { items, error, reload } = useIncreases(client, model);
  const [comments, setComments] = React.useState<Record<string, string>>({});
  const [failure, setFailure] = React.useState('');
  const [status, setStatus] = React.useState('');

  const decide = async (item: IIncrease, approve: boolean) => {
    setFailure('');
    setStatus('');
    try {
      const decided = await client.decideIncrease(
        item.name,
        approve,
        comments[item.name] ?? ''
      );
      setStatus(`${decided.name} is ${decided.phase}.`);
      reload();
      void model.refresh(); // the raised (or unchanged) balances
    } catch (e) {
      setFailure((e as Error).message);
    }
  };

  const pending = items.filter(item => item.phase === 'Pending');
  const decided = items.filter(item => item.phase !== 'Pending');
  return (
    <>
      <Outcome status={status} failure={failure} />
      <IncreaseList
        items={pending}
        error={error}
        label="Pending requests"
        actions={item => (
          <div className="jp-QuotaIncrease-actions">
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
              onClick={() => void decide(item, true)}
            >
              Approve
            </button>
            <button
              className="jp-mod-styled jp-mod-warn"
              aria-label={`Deny ${item.name}`}
              onClick={() => void decide(item, false)}
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
  const [entries, setEntries] = React.useState<IAuditEntry[]>([]);
  const [error, setError] = React.useState('');
  const generation = model.generation;
  React.useEffect(() => {
    let live = true;
    client.audit().then(
      log => live && setEntries(log.entries),
      e => live && setError(String(e.message ?? e))
    );
    return () => {
      live = false;
    };
  }, [client, generation]);
  return (
    <>
      <a
        className="jp-QuotaAudit-export"
        href={client.auditCsvUrl()}
        download="quota-audit.csv"
      >
        Export CSV
      </a>
      {error && (
        <p className="jp-QuotaSidebar-error" role="alert">
          Could not read the audit log: {error}
        </p>
      )}
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
                {entry.at.replace('T', ' ')}
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
