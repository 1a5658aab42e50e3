/**
 * The admin view, a left-area panel of its own that only quota admins get:
 * every team's balance (an admin's `GET namespaces` lists every team) and the
 * profile form.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { quotaAdminIcon } from '../icons';
import { QuotaModel } from '../model';
import { ProfileEditor } from '../profileeditor';
import { useModel, useNow } from './hooks';
import {
  AuditLog,
  IIncreaseAdminClient,
  IncreaseRequests
} from './IncreaseAdmin';
import { PanelHeader } from './PanelHeader';
import { ProfileForm } from './ProfileForm';
import { TeamBalances } from './TeamBalances';

export interface IAdminPanelOptions {
  model: QuotaModel;
  editor: ProfileEditor;
  /** Increase requests to decide, and the audit log. */
  client: IIncreaseAdminClient;
}

/** The id of the admin panel (and of its tab in the left side bar). */
export const ADMIN_PANEL_ID = 'jupyter-quota-admin';

export class QuotaAdminPanel extends ReactWidget {
  constructor(readonly options: IAdminPanelOptions) {
    super();
    this.id = ADMIN_PANEL_ID;
    this.addClass('jp-QuotaSidebar');
    this.addClass('jp-QuotaAdmin');
    this.title.icon = quotaAdminIcon;
    this.title.caption = 'Quota admin: every team’s balance and profile';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'Quota admin');
  }

  render(): JSX.Element {
    return <AdminContent {...this.options} />;
  }
}

function AdminContent(props: IAdminPanelOptions): JSX.Element {
  const { model, editor, client } = props;
  useModel(model);
  const now = useNow();
  const error = model.error;
  return (
    <div className="jp-QuotaSidebar-content">
      <PanelHeader
        title="Quota admin"
        model={model}
        refreshLabel="Refresh all balances"
        refreshTitle="Read every team's balance again"
      />
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-balanceTitle"
      >
        <h2 id="jp-QuotaAdmin-balanceTitle">All teams</h2>
        {error && (
          <p className="jp-QuotaSidebar-error" role="alert">
            Could not refresh the balances: {error.message}
          </p>
        )}
        <TeamBalances namespaces={model.namespaces} now={now} />
      </section>
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-profileTitle"
      >
        <h2 id="jp-QuotaAdmin-profileTitle">Team profile</h2>
        <ProfileForm editor={editor} />
      </section>
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-increaseTitle"
      >
        <h2 id="jp-QuotaAdmin-increaseTitle">Increase requests</h2>
        <IncreaseRequests model={model} client={client} />
      </section>
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-auditTitle"
      >
        <h2 id="jp-QuotaAdmin-auditTitle">Audit log</h2>
        <AuditLog model={model} client={client} />
      </section>
    </div>
  );
}
