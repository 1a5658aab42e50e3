/**
 * The head of a quota panel: its title, who is signed in, and a Refresh button.
 */

import * as React from 'react';

import { QuotaModel } from '../model';

export interface IPanelHeaderProps {
  title: string;
  model: QuotaModel;
  /** The Refresh button's accessible name and tooltip. */
  refreshLabel: string;
  refreshTitle: string;
}

export function PanelHeader(props: IPanelHeaderProps): JSX.Element {
  const { model } = props;
  return (
    <header className="jp-QuotaSidebar-header">
      <h1>{props.title}</h1>
      {model.identity && (
        <span className="jp-QuotaSidebar-user">{model.identity.name}</span>
      )}
      <span
        className="jp-QuotaSidebar-live"
        data-push={model.live ? 'held' : 'polling'}
        title={
          model.live
            ? 'Changes arrive as they happen'
            : `Read again every ${Math.round(model.refreshInterval / 1000)} s`
        }
      >
        {model.live ? 'Live' : ''}
      </span>
      <button
        type="button"
        className="jp-mod-styled jp-QuotaButton"
        aria-label={props.refreshLabel}
        title={props.refreshTitle}
        onClick={() => void model.refresh()}
      >
        Refresh
      </button>
    </header>
  );
}
