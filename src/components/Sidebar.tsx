/**
 * The left-area panel: each namespace's balance, the team's jobs and the
 * planner form, drawn from the `QuotaModel`.
 */

import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { QuotaModel } from '../model';
import { formatAge } from '../quantity';
import { EXTENSION_MISSING_MESSAGE } from '../request';
import { quotaIcon } from '../icons';
import { BalanceView } from './BalanceView';
import { useModel, useNow } from './hooks';
import { IIncreaseClient, IncreaseForm, useIncreases } from './Increases';
import { JobsView } from './JobsView';
import { PanelHeader } from './PanelHeader';
import { IPlannerClient, PlannerForm } from './PlannerForm';
import { UsageSection } from './UsageSection';
import { IUsageClient } from '../usage';
import { IRecommendationClient } from '../recommendations';
import { RecommendationsSection } from './Recommendations';

export interface ISidebarOptions {
  model: QuotaModel;
  client: IPlannerClient & IUsageClient & IRecommendationClient;
  /** Temporary increase requests: ask, and see where they stand. */
  increases: IIncreaseClient;
  confirm: (title: string, body: string, action?: string) => Promise<boolean>;
  copy: (text: string) => void;
  /** Lines of log the viewer shows (read on each render, so settings apply at once). */
  tailLines: () => number;
}

/**
 * The sidebar widget (id `jupyter-quota-sidebar`).
 */
export class QuotaSidebar extends ReactWidget {
  constructor(readonly options: ISidebarOptions) {
    super();
    this.id = 'jupyter-quota-sidebar';
    this.addClass('jp-QuotaSidebar');
    this.title.icon = quotaIcon;
    this.title.caption = 'Team quota, jobs and fine-tune planner';
    this.node.setAttribute('role', 'region');
    this.node.setAttribute('aria-label', 'Team quota');
  }

  render(): JSX.Element {
    return <SidebarContent {...this.options} />;
  }
}

function SidebarContent(props: ISidebarOptions): JSX.Element {
  const { model } = props;
  useModel(model);
  const now = useNow();
  // Read once for both: the form's list, and the balances they raise.
  const increases = useIncreases(props.increases, model);
  const error = model.error;
  const fetched = model.fetchedAt;

  let body: JSX.Element;
  if (model.extensionMissing) {
    body = <ExtensionMissing />;
  } else if (!model.loaded) {
    body = error ? (
      <p className="jp-QuotaSidebar-error" role="alert">
        Could not read the quota: {error.message}
      </p>
    ) : (
      <p className="jp-QuotaSidebar-empty" role="status">
        Loading the quota…
      </p>
    );
  } else if (model.namespaces.length === 0) {
    body = (
      <p className="jp-QuotaSidebar-empty">
        You belong to no team namespace
        {model.identity ? ` (signed in as ${model.identity.name})` : ''}. Ask
        your hub admin to add you to a team.
      </p>
    );
  } else {
    body = (
      <>
        {error && (
          <p className="jp-QuotaSidebar-error" role="alert">
            Could not refresh ({error.message}); showing what was read{' '}
            {formatAge((now - (fetched ?? now)) / 1000)} ago.
          </p>
        )}
        <section
          className="jp-QuotaSidebar-section"
          aria-labelledby="jp-QuotaSidebar-balanceTitle"
        >
          <h2 id="jp-QuotaSidebar-balanceTitle">Balance</h2>
          {model.namespaces.map(ns => (
            <BalanceView
              key={ns.name}
              summary={ns}
              now={now}
              increases={increases.items}
            />
          ))}
        </section>
        <UsageSection model={model} client={props.client} />
        <RecommendationsSection
          client={props.client}
          idPrefix="jp-QuotaSidebar-recommend"
        />
        <section
          className="jp-QuotaSidebar-section"
          aria-labelledby="jp-QuotaSidebar-jobsTitle"
        >
          <h2 id="jp-QuotaSidebar-jobsTitle">Jobs</h2>
          {model.namespaces.map(ns => (
            <JobsView
              key={ns.name}
              model={model}
              namespace={ns.name}
              now={now}
              tailLines={props.tailLines()}
              confirm={props.confirm}
            />
          ))}
        </section>
        <section
          className="jp-QuotaSidebar-section"
          aria-labelledby="jp-QuotaSidebar-plannerTitle"
        >
          <h2 id="jp-QuotaSidebar-plannerTitle">Plan a fine-tune</h2>
          <PlannerForm model={model} client={props.client} copy={props.copy} />
        </section>
        <section
          className="jp-QuotaSidebar-section"
          aria-labelledby="jp-QuotaSidebar-increaseTitle"
        >
          <h2 id="jp-QuotaSidebar-increaseTitle">Ask for more</h2>
          <IncreaseForm
            model={model}
            client={props.increases}
            increases={increases}
          />
        </section>
      </>
    );
  }

  return (
    <div className="jp-QuotaSidebar-content">
      <PanelHeader
        title="Team quota"
        model={model}
        refreshLabel="Refresh quota"
        refreshTitle="Read the balance and jobs again"
      />
      {body}
    </div>
  );
}

function ExtensionMissing(): JSX.Element {
  return (
    <div className="jp-QuotaSidebar-missing" role="alert">
      <p>
        <strong>The jupyter_quota server extension is missing.</strong> The
        quota API answered 404, so the Python package is not installed or not
        enabled on this server.
      </p>
      <p>Install it where the Jupyter server runs, then restart the server:</p>
      <pre className="jp-QuotaSidebar-command">pip install jupyter_quota</pre>
      <p className="jp-QuotaSidebar-hint">{EXTENSION_MISSING_MESSAGE}</p>
    </div>
  );
}
