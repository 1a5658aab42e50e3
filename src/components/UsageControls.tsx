/**
 * The usage views' switches: the time range (24 hours, 7 days) as toggle
 * buttons, and which resource the figures count.
 */

import * as React from 'react';

import {
  IUsageRange,
  USAGE_RANGES,
  USAGE_RESOURCES,
  UsageResource
} from '../usage';

export interface IUsageControlsProps {
  /** Prefix of the controls' ids (one set per panel). */
  idPrefix: string;
  range: IUsageRange;
  resource: UsageResource;
  onRange: (range: IUsageRange) => void;
  onResource: (resource: UsageResource) => void;
}

export function UsageControls(props: IUsageControlsProps): JSX.Element {
  const selectId = `${props.idPrefix}-resource`;
  return (
    <div className="jp-QuotaUsage-controls">
      <div
        className="jp-QuotaUsage-ranges"
        role="group"
        aria-label="Time range"
      >
        {USAGE_RANGES.map(range => (
          <button
            key={range.id}
            type="button"
            className="jp-mod-styled jp-QuotaButton"
            aria-pressed={range.id === props.range.id}
            onClick={() => props.onRange(range)}
          >
            {range.label}
          </button>
        ))}
      </div>
      <label htmlFor={selectId} className="jp-QuotaUsage-resource">
        Count{' '}
        <select
          id={selectId}
          className="jp-mod-styled"
          value={props.resource}
          onChange={e => props.onResource(e.target.value as UsageResource)}
        >
          {USAGE_RESOURCES.map(r => (
            <option key={r.key} value={r.key}>
              {r.label}
            </option>
          ))}
        </select>
      </label>
    </div>
  );
}

/** The range and resource state behind a set of controls (24 hours and GPU-hours first). */
export function useUsageControls(): {
  range: IUsageRange;
  resource: UsageResource;
  setRange: (range: IUsageRange) => void;
  setResource: (resource: UsageResource) => void;
} {
  const [range, setRange] = React.useState(USAGE_RANGES[0]);
  const [resource, setResource] = React.useState<UsageResource>('gpuSeconds');
  return { range, resource, setRange, setResource };
}

/** The unit of a resource's hours (`GPU-hours`). */
export function unitOf(resource: UsageResource): string {
  return USAGE_RESOURCES.find(r => r.key === resource)?.label ?? resource;
}
