/**
 * The admin view's panel, a left-area tab of its own that only quota admins
 * get; its content is `AdminView.tsx`.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { quotaAdminIcon } from '../icons';
import { AdminView, IAdminViewProps } from './AdminView';

export type IAdminPanelOptions = IAdminViewProps;

/** The id of the admin panel (and of its tab in the left side bar). */
export const ADMIN_PANEL_ID = 'jupyter-quota-admin';

export class QuotaAdminPanel extends ReactWidget {
  constructor(readonly options: IAdminPanelOptions) {
    super();
    this.id = ADMIN_PANEL_ID;
    this.addClass('jp-QuotaSidebar');
    this.addClass('jp-QuotaAdmin');
    this.title.icon = quotaAdminIcon;
    // A word beside the icon: two quota icons side by side are told apart by it.
    this.title.label = 'Quota admin';
    this.title.caption = 'Quota admin: every team’s balance and profile';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'Quota admin');
  }

  render(): JSX.Element {
    return <AdminView {...this.options} />;
  }
}
