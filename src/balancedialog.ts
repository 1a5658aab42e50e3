/**
 * The "Show Team Quota Balance" dialog: a table of what each namespace has left.
 */

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { requestAPI } from './request';
import { IBalance, INamespaceList, INamespaceSummary } from './tokens';

/**
 * The quota keys the dialog shows, as [column title, key].
 */
const COLUMNS: ReadonlyArray<[string, string]> = [
  ['GPU', 'requests.nvidia.com/gpu'],
  ['CPU', 'requests.cpu'],
  ['Memory', 'limits.memory']
];

/**
 * Fetch the namespaces and show their remaining quota, or the error, in a dialog.
 */
export async function showBalanceDialog(
  settings: ServerConnection.ISettings
): Promise<void> {
  let body: Widget;
  try {
    const list = await requestAPI<INamespaceList>('namespaces', settings);
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
   * A table with one row per namespace and the remaining amount of each column.
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
    caption.textContent = 'Remaining quota';
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
      for (const [, key] of COLUMNS) {
        const cell = row.insertCell();
        cell.className = 'jp-Quota-quantity';
        const [text, title] = remaining(ns.balance, key);
        cell.textContent = text;
        cell.title = title;
      }
      if (ns.balance?.stale) {
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
  function remaining(
    balance: IBalance | undefined,
    key: string
  ): [string, string] {
    const resource = balance?.resources?.[key];
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
