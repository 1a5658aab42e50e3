/**
 * The admin view, a left-area panel of its own that only quota admins get:
 * every team's balance (an admin's `GET namespaces` lists every team), the
 * stalled jobs of every team, and the profile form.
 * every team's balance (an admin's `GET namespaces` lists every team), their
 * usage, top holders and stalled jobs, the monthly chargeback, and the
 * profile form.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { quotaAdminIcon } from '../icons';
import { stalledLine } from '../jobs';
import { QuotaModel } from '../model';
import { ProfileEditor } from '../profileeditor';
import { IChargebackClient, IUsageClient } from '../usage';
import { AdminUsage } from './AdminUsage';
import { ChargebackView } from './ChargebackView';
import { IEstimatorErrors } from '../tokens';
import { EstimatorErrors } from './EstimatorErrors';
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
  /** Usage, chargeback, increase requests to decide, and the audit log. */
  client: IUsageClient & IChargebackClient & IIncreaseAdminClient;
  /** Reads `GET estimator/errors` for the estimator accuracy section. */
  estimatorErrors: () => Promise<IEstimatorErrors>;
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
  const generation = useModel(model);
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
      <StalledJobs model={model} />
      <AdminUsage model={model} client={props.client} />
      <ChargebackView client={props.client} />
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-errorsTitle"
      >
        <h2 id="jp-QuotaAdmin-errorsTitle">Estimator accuracy</h2>
        <EstimatorErrors load={props.estimatorErrors} version={generation} />
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

/**
 * Every team's Running jobs flagged as stalled (the job's `stalled` field):
 * jobs that hold resources and show no progress.
 */
function StalledJobs(props: { model: QuotaModel }): JSX.Element {
  const { model } = props;
  const stalled = model.namespaces
    .flatMap(ns => model.jobs(ns.name))
    .filter(job => stalledLine(job) !== '');
  return (
    <section
      className="jp-QuotaSidebar-section jp-QuotaAdmin-stalled"
      aria-labelledby="jp-QuotaAdmin-stalledTitle"
    >
      <h2 id="jp-QuotaAdmin-stalledTitle">Stalled jobs</h2>
      {stalled.length === 0 ? (
        <p className="jp-QuotaSidebar-empty">No stalled jobs.</p>
      ) : (
        <ul
          className="jp-QuotaJobs"
          aria-labelledby="jp-QuotaAdmin-stalledTitle"
        >
          {stalled.map(job => (
            <li
              key={`${job.namespace}/${job.name}`}
              className="jp-QuotaJob"
              data-job={job.name}
              data-namespace={job.namespace}
              data-stalled={job.stalled?.reason}
            >
              <div className="jp-QuotaJob-head">
                <span className="jp-QuotaJob-name">
                  {job.namespace}/{job.name}
                </span>
                <span className="jp-QuotaJob-stalledFlag">Stalled</span>
              </div>
              <div className="jp-QuotaJob-meta">
                <span title="owner">{job.owner}</span> · {job.gpus}{' '}
                {job.gpus === 1 ? 'GPU' : 'GPUs'}
              </div>
              <p className="jp-QuotaJob-stalled">{stalledLine(job)}</p>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
