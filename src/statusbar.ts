/**
 * The status bar item `GPU 1/2 left · team-alpha`; a click (or Enter) opens
 * the sidebar.
 */

import { Widget } from '@lumino/widgets';

import { QuotaModel } from './model';

export class QuotaStatus extends Widget {
  constructor(
    readonly model: QuotaModel,
    readonly open: () => void
  ) {
    super();
    this.addClass('jp-QuotaStatus');
    this.node.tabIndex = 0;
    this.node.setAttribute('role', 'button');
    this.node.addEventListener('click', () => this.open());
    this.node.addEventListener('keydown', event => {
      if (event.key === 'Enter' || event.key === ' ') {
        event.preventDefault();
        this.open();
      }
    });
    model.changed.connect(this._update, this);
    this._update();
  }

  /** The text shown, e.g. `GPU 1/2 left · team-alpha` ('' when there is none). */
  static text(model: QuotaModel): string {
    const gpu = model.gpuSummary();
    if (gpu) {
      return `GPU ${gpu.remaining}/${gpu.hard} left · ${gpu.namespace}`;
    }
    if (model.extensionMissing) {
      return 'Quota: server extension missing';
    }
    const ns = model.namespaces[0];
    return ns ? `Quota · ${ns.name}` : '';
  }

  dispose(): void {
    this.model.changed.disconnect(this._update, this);
    super.dispose();
  }

  private _update(): void {
    const text = QuotaStatus.text(this.model);
    if (text && text !== this.node.textContent) {
      this.node.textContent = text;
      if (!QuotaStatus._marked && this.model.gpuSummary()) {
        QuotaStatus._marked = true;
        performance.mark('jupyter-quota:first-status');
      }
    }
    const stale = this.model.error ? ' (could not refresh)' : '';
    this.node.title = `${text}${stale}. Open the team quota panel.`;
    this.node.setAttribute(
      'aria-label',
      `${text || 'Team quota'}${stale}: open the team quota panel`
    );
    this.setHidden(!text);
  }

  private static _marked = false;
}
