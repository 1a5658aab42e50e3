/**
 * The zombie flag of a job the service finds stalled: how long, why, and the
 * service's message. It only informs; cancelling stays the owner's choice.
 */

import * as React from 'react';

import { stalledOf, stalledText } from '../stalled';
import { IJob } from '../tokens';

export function StalledFlag(props: {
  job: IJob;
  now: number;
}): JSX.Element | null {
  const stalled = stalledOf(props.job);
  if (!stalled) {
    return null;
  }
  return (
    <p
      className="jp-QuotaJob-stalled"
      data-reason={stalled.reason}
      title={`Flagged since ${stalled.since}`}
    >
      <span className="jp-QuotaJob-stalledBadge">Zombie?</span>{' '}
      {stalledText(stalled, props.now)}
      {stalled.message ? ` (${stalled.message})` : ''}
    </p>
  );
}
