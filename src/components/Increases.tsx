/**
 * Temporary quota increases in the sidebar: a form to ask for more GPUs for
 * some hours (with a reason), and the requests of the user's teams with where
 * each stands. The admin's side (approve, deny, the audit log) is in
 * `IncreaseAdmin.tsx`.
 */

import * as React from 'react';

import { QuotaModel, gpuKey } from '../model';
import { IIncrease, IIncreaseList, IIncreaseRequest } from '../tokens';

export interface IIncreaseClient {
  requestIncrease(
    namespace: string,
    request: IIncreaseRequest
  ): Promise<IIncrease>;
  increases(): Promise<IIncreaseList>;
}

/**
 * The requests the server lists, read again whenever the model refreshes
 * (its poll, a manual refresh) and after `reload()`.
 */
export function useIncreases(
  client: IIncreaseClient,
  model: QuotaModel
): { items: IIncrease[]; error: string; reload: () => void } {
  const [items, setItems] = React.useState<IIncrease[]>([]);
  const [error, setError] = React.useState('');
  const [asked, setAsked] = React.useState(0);
  const generation = model.generation;
  React.useEffect(() => {
    let live = true;
    client.increases().then(
      list => {
        if (live) {
          setItems(list.increases);
          setError('');
        }
      },
      e => live && setError(String(e.message ?? e))
    );
    return () => {
      live = false;
    };
  }, [client, generation, asked]);
  return { items, error, reload: () => setAsked(n => n + 1) };
}

export function IncreaseForm(props: {
  model: QuotaModel;
  client: IIncreaseClient;
}): JSX.Element {
  const { model, client } = props;
  const { items, error, reload } = useIncreases(client, model);
  const namespaces = model.namespaces;
  const [namespace, setNamespace] = React.useState('');
  const [gpus, setGpus] = React.useState('1');
  const [hours, setHours] = React.useState('8');
  const [reason, setReason] = React.useState('');
  const [status, setStatus] = React.useState('');
  const [failure, setFailure] = React.useState('');
  const [busy, setBusy] = React.useState(false);
  const chosen =
    namespaces.find(ns => ns.name === namespace) ?? namespaces[0] ?? null;

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    if (!chosen) {
      return;
    }
    setBusy(true);
    setStatus('');
    setFailure('');
    try {
      const made = await client.requestIncrease(chosen.name, {
        resources: { [gpuKey(chosen)]: gpus.trim() },
        hours: Number(hours),
        reason
      });
      setStatus(
        `Asked: ${made.name} is ${made.phase}; an admin approves or denies it.`
      );
      setReason('');
      reload();
    } catch (e) {
      setFailure((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <form
        className="jp-QuotaIncrease-form"
        aria-label="Ask for a temporary increase"
        onSubmit={submit}
      >
        {namespaces.length > 1 && (
          <label>
            Namespace
            <select
              value={chosen?.name ?? ''}
              onChange={e => setNamespace(e.target.value)}
            >
              {namespaces.map(ns => (
                <option key={ns.name} value={ns.name}>
                  {ns.name}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          More GPUs
          <input
            type="number"
            min={1}
            step={1}
            value={gpus}
            onChange={e => setGpus(e.target.value)}
          />
        </label>
        <label>
          For hours
          <input
            type="number"
            min={0}
            step="any"
            value={hours}
            onChange={e => setHours(e.target.value)}
          />
        </label>
        <label>
          Reason
          <textarea
            value={reason}
            rows={2}
            onChange={e => setReason(e.target.value)}
            placeholder="e.g. a paper deadline on Friday"
          />
        </label>
        <button
          type="submit"
          className="jp-mod-styled jp-mod-accept"
          disabled={busy || !chosen}
        >
          Ask for more
        </button>
        <Outcome status={status} failure={failure} />
      </form>
      <IncreaseList items={items} error={error} label="Your teams' requests" />
    </>
  );
}

export function IncreaseList(props: {
  items: IIncrease[];
  error: string;
  label: string;
  actions?: (item: IIncrease) => JSX.Element | null;
}): JSX.Element {
  const { items, error, label, actions } = props;
  return (
    <div className="jp-QuotaIncrease-list" aria-label={label} role="list">
      {error && (
        <p className="jp-QuotaSidebar-error" role="alert">
          Could not read the requests: {error}
        </p>
      )}
      {items.length === 0 && !error && (
        <p className="jp-QuotaSidebar-empty">No requests.</p>
      )}
      {items.map(item => (
        <div
          key={item.name}
          role="listitem"
          className="jp-QuotaIncrease-item"
          data-name={item.name}
          data-phase={item.phase}
        >
          <div>
            <strong>{item.name}</strong> {item.namespace}:{' '}
            <span className="jp-QuotaIncrease-phase">{item.phase}</span>
            {decidedText(item)}
            {item.phase === 'Approved' && item.expiresAt
              ? ` until ${item.expiresAt}`
              : ''}
          </div>
          <div>
            {Object.entries(item.resources)
              .map(([key, value]) => `+${value} ${key}`)
              .join(', ')}{' '}
            for {item.hours} h, asked by {item.user}: {item.reason}
          </div>
          {item.comment ? (
            <div className="jp-QuotaIncrease-comment">“{item.comment}”</div>
          ) : null}
          {actions ? actions(item) : null}
        </div>
      ))}
    </div>
  );
}

/** Who decided: "by ada", or "(approved by ada)" once the increase has ended. */
function decidedText(item: IIncrease): string {
  if (!item.decidedBy) {
    return '';
  }
  return item.phase === 'Expired'
    ? ` (approved by ${item.decidedBy})`
    : ` by ${item.decidedBy}`;
}

/** What the last action did (a status line) or why it failed (an alert). */
export function Outcome(props: {
  status: string;
  failure: string;
}): JSX.Element {
  return (
    <>
      {props.status && (
        <p className="jp-QuotaIncrease-status" role="status">
          {props.status}
        </p>
      )}
      {props.failure && (
        <p className="jp-QuotaSidebar-error" role="alert">
          {props.failure}
        </p>
      )}
    </>
  );
}
