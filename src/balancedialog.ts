/**
 * The "Show Team Quota Balance" dialog: a table of what each namespace has left.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { IQuotaClient, gpuKey } from './model';
import { IBalance, INamespaceSummary } from './tokens';

/**
 * The columns the dialog shows, as [title, the namespace's quota key]; the
 * GPU's key names the profile's own GPU resource (`requests.amd.com/gpu`, ...).
 */
const COLUMNS: ReadonlyArray<[string, (ns: INamespaceSummary) => string]> = [
  ['GPU', gpuKey],
  ['CPU', () => 'requests.cpu'],
  ['Memory', () => 'limits.memory']
];

/**
 * Fetch the namespaces and show what each has left, or the error, in a dialog.
 */
export async function showBalanceDialog(
  client: Pick<IQuotaClient, 'namespaces'>
): Promise<void> {
  let body: Widget;
  try {
    const list = await client.namespaces();
    body = Private.balanceTable(list.namespaces);
  } catch (error) {
    body = Private.errorMessage(Private.describe(error));
  }
  await showDialog({
    title: 'Team Quota Balance',
    body,
    buttons: [Dialog.okButton({ label: 'Close' })]
  });
}

namespace Private {
  /**
   * A table with one row per namespace and the amount of each column left.
   */
  export function balanceTable(namespaces: INamespaceSummary[]): Widget {
    const widget = new Widget();
    widget.addClass('jp-Quota-balance');
    if (namespaces.length === 0) {
      widget.node.appendChild(
        paragraph('No team namespace is visible to you.', 'jp-Quota-empty')
      );
      return widget;
    }

    const table = document.createElement('table');
    table.className = 'jp-Quota-balanceTable';
    const caption = document.createElement('caption');
    caption.textContent = 'Quota left';
    table.appendChild(caption);

    const head = table.createTHead().insertRow();
    for (const title of ['Namespace', 'Team', ...COLUMNS.map(c => c[0])]) {
      const th = document.createElement('th');
      th.scope = 'col';
      th.textContent = title;
      head.appendChild(th);
    }
    for (const th of Array.from(head.cells).slice(2)) {
      th.classList.add('jp-Quota-quantity');
    }

    const rows = table.createTBody();
    for (const ns of namespaces) {
      const row = rows.insertRow();
      row.dataset.namespace = ns.name;
      const name = document.createElement('th');
      name.scope = 'row';
      name.textContent = ns.name;
      row.appendChild(name);
      row.insertCell().textContent = ns.team;
      for (const [, keyOf] of COLUMNS) {
        const cell = row.insertCell();
        cell.className = 'jp-Quota-quantity';
        const [text, title] = remaining(ns.balance, keyOf(ns));
        cell.textContent = text;
        cell.title = title;
      }
      if (ns.balance.stale) {
        row.classList.add('jp-mod-stale');
        row.title = `Last read ${ns.balance.observedAt}; the quota could not be refreshed.`;
      }
    }
    widget.node.appendChild(table);
    return widget;
  }

  /**
   * The dialog body when the balance could not be read.
   */
  export function errorMessage(message: string): Widget {
    const widget = new Widget();
    widget.addClass('jp-Quota-balance');
    widget.node.appendChild(paragraph(message, 'jp-Quota-error'));
    return widget;
  }

  export function describe(error: unknown): string {
    return error instanceof Error ? error.message : String(error);
  }

  /**
   * The remaining amount of `key` and a tooltip with hard and used; a dash
   * when no quota limits that key.
   */
  function remaining(balance: IBalance, key: string): [string, string] {
    const resource = balance.resources[key];
    if (!resource) {
      return ['—', `No quota limits ${key}`];
    }
    return [
      resource.remaining,
      `${key}: ${resource.used} used of ${resource.hard}`
    ];
  }

  function paragraph(text: string, className: string): HTMLElement {
    const p = document.createElement('p');
    p.className = className;
    p.textContent = text;
    return p;
  }
}
