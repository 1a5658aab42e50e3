/**
 * Temporary quota increases in the sidebar: a form to ask for more GPUs for
 * some hours (with a reason), and the requests of the user's teams with where
 * each stands. The admin's side (approve, deny, the audit log) is in
 * `IncreaseAdmin.tsx`.
 */

import * as React from 'react';

import { increaseAmounts, localTime } from '../increases';
import { QuotaModel, gpuKey } from '../model';
import {
  IIncrease,
  IIncreaseList,
  IIncreaseRequest,
  INamespaceSummary
} from '../tokens';
import { useLoad } from './hooks';
import { Outcome, TaskError, useTask } from './task';

export interface IIncreaseClient {
  requestIncrease(
    namespace: string,
    request: IIncreaseRequest
  ): Promise<IIncrease>;
  increases(): Promise<IIncreaseList>;
}

/** The requests of the user's teams, as `useIncreases` keeps them. */
export interface IIncreases {
  items: IIncrease[];
  error: string;
  /** Read them again (after a request, a decision, or a failed read). */
  reload: () => void;
}

/**
 * The requests the server lists, read again whenever the model refreshes
 * (its poll, a manual refresh) and after `reload()`.
 */
export function useIncreases(
  client: IIncreaseClient,
  model: QuotaModel
): IIncreases {
  const generation = model.generation;
  const list = useLoad(() => client.increases(), [client, generation]);
  return {
    items: list.value?.increases ?? [],
    error: list.error,
    reload: list.retry
  };
}

export function IncreaseForm(props: {
  model: QuotaModel;
  client: IIncreaseClient;
  /** The sidebar's `useIncreases`: the balances read the same list. */
  increases: IIncreases;
}): JSX.Element {
  const { model, client, increases } = props;
  const namespaces = model.namespaces;
  const [namespace, setNamespace] = React.useState('');
  const [gpus, setGpus] = React.useState('1');
  const [hours, setHours] = React.useState('8');
  const [reason, setReason] = React.useState('');
  const [status, setStatus] = React.useState('');
  const chosen =
    namespaces.find(ns => ns.name === namespace) ?? namespaces[0] ?? null;

  const asking = useTask(async (ns: INamespaceSummary) => {
    const made = await client.requestIncrease(ns.name, {
      resources: { [gpuKey(ns)]: gpus.trim() },
      hours: Number(hours),
      reason
    });
    setStatus(
      `Asked: ${made.name} is ${made.phase}; an admin approves or denies it.`
    );
    setReason('');
    increases.reload();
  });

  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    if (chosen) {
      setStatus('');
      void asking.run(chosen);
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
          disabled={asking.busy || !chosen}
        >
          Ask for more
        </button>
        <Outcome status={status} failure={asking.error} />
      </form>
      <IncreaseList
        items={increases.items}
        error={increases.error}
        onRetry={increases.reload}
        label="Your teams' requests"
      />
    </>
  );
}

export function IncreaseList(props: {
  items: IIncrease[];
  error: string;
  label: string;
  /** Read the list again after a failed read. */
  onRetry?: () => void;
  actions?: (item: IIncrease) => JSX.Element | null;
}): JSX.Element {
  const { items, error, label, actions } = props;
  return (
    <div className="jp-QuotaIncrease-list" aria-label={label} role="list">
      <TaskError
        error={error}
        prefix="Could not read the requests: "
        onRetry={props.onRetry}
        retryLabel="Read the requests again"
      />
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
            {item.phase === 'Approved' && item.expiresAt && (
              <>
                {' until '}
                <time dateTime={item.expiresAt} title={item.expiresAt}>
                  {localTime(item.expiresAt)}
                </time>
              </>
            )}
          </div>
          <div>
            {increaseAmounts(item.resources).map((amount, i) => (
              <React.Fragment key={amount.key}>
                {i > 0 && ', '}
                <span
                  className="jp-QuotaIncrease-amount"
                  title={`${amount.key}: ${item.resources[amount.key]}`}
                >
                  {amount.text}
                </span>
              </React.Fragment>
            ))}{' '}
            for {item.hours} h, asked by {item.user}{' '}
            <time dateTime={item.createdAt} title={item.createdAt}>
              {localTime(item.createdAt)}
            </time>
            : {item.reason}
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
