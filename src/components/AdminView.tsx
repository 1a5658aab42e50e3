/**
 * The admin view's content (the panel is `AdminPanel.tsx`): every team's
 * balance (an admin's `GET namespaces` lists every team) with the temporary
 * increases it includes, their usage, top holders and stalled jobs, the
 * monthly chargeback, the recommended quotas (with Apply) and the capacity
 * curve, the estimator's accuracy, the profile form, the increase requests to
 * decide, and the audit log.
 */

import * as React from 'react';

import { stalledLine } from '../jobs';
import { QuotaModel } from '../model';
import { IProfileClient, ProfileEditor } from '../profileeditor';
import { IRecommendationClient, IReplayClient } from '../recommendations';
import { IEstimatorErrors } from '../tokens';
import { IChargebackClient, IUsageClient } from '../usage';
import { AdminUsage } from './AdminUsage';
import { CapacityCurve } from './CapacityCurve';
import { ChargebackView } from './ChargebackView';
import { EstimatorErrors } from './EstimatorErrors';
import { useModel, useNow } from './hooks';
import {
  AuditLog,
  IIncreaseAdminClient,
  IncreaseRequests
} from './IncreaseAdmin';
import { useIncreases } from './Increases';
import { PanelHeader } from './PanelHeader';
import { ProfileForm } from './ProfileForm';
import { RecommendationsSection } from './Recommendations';
import { TeamBalances } from './TeamBalances';

export interface IAdminViewProps {
  model: QuotaModel;
  editor: ProfileEditor;
  /** Usage, chargeback, recommendations and replays, increase requests to decide, and the audit log. */
  client: IUsageClient &
    IChargebackClient &
    IRecommendationClient &
    IReplayClient &
    Pick<IProfileClient, 'putProfile'> &
    IIncreaseAdminClient;
  /** Reads `GET estimator/errors` for the estimator accuracy section. */
  estimatorErrors: () => Promise<IEstimatorErrors>;
}

export function AdminView(props: IAdminViewProps): JSX.Element {
  const { model, editor, client } = props;
  const generation = useModel(model);
  const now = useNow();
  const error = model.error;
  // Read once: the requests to decide, and the increases the balances include.
  const increases = useIncreases(client, model);
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
        <TeamBalances
          namespaces={model.namespaces}
          now={now}
          increases={increases.items}
        />
      </section>
      <StalledJobs model={model} />
      <AdminUsage model={model} client={props.client} />
      <ChargebackView client={props.client} />
      <RecommendationsSection
        client={client}
        idPrefix="jp-QuotaAdmin-recommend"
        apply={{
          client,
          stored: team => editor.profiles.find(p => p.team === team) ?? null,
          onApplied: async () => {
            await Promise.all([editor.load(), model.refresh()]);
          }
        }}
      />
      <CapacityCurve client={client} profiles={() => editor.profiles} />
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
        <ProfileForm editor={editor} increases={increases.items} now={now} />
      </section>
      <section
        className="jp-QuotaSidebar-section"
        aria-labelledby="jp-QuotaAdmin-increaseTitle"
      >
        <h2 id="jp-QuotaAdmin-increaseTitle">Increase requests</h2>
        <IncreaseRequests model={model} client={client} increases={increases} />
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
