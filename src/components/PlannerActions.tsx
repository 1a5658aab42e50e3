/**
 * The planner form's buttons: estimate and plan, copy the `%swift_sft` line,
 * launch. A button that cannot be used says why, beside it and on hover.
 */

import * as React from 'react';

export interface IPlannerActionsProps {
  busy: boolean;
  hasModel: boolean;
  /** The namespace a launch goes to ('' when the user has none). */
  namespace: string;
  /** Whether the planner answered with a plan to launch. */
  recommended: boolean;
  onCopy: () => void;
  onLaunch: () => void;
}

const WHY_ID = 'jp-QuotaPlanner-why';

/**
 * Why the form's buttons are disabled ('' when none is): what to do next.
 */
export function whyDisabled(props: {
  busy: boolean;
  hasModel: boolean;
  namespace: string;
}): { plan: string; launch: string } {
  if (!props.hasModel) {
    const why = 'Enter a model first.';
    return { plan: why, launch: why };
  }
  if (props.busy) {
    const why = 'Waiting for the server’s answer…';
    return { plan: why, launch: why };
  }
  return {
    plan: '',
    launch: props.namespace
      ? ''
      : 'You belong to no team namespace to launch in.'
  };
}

export function PlannerActions(props: IPlannerActionsProps): JSX.Element {
  const why = whyDisabled(props);
  const shown = why.plan || why.launch;
  return (
    <>
      <div className="jp-QuotaPlanner-actions">
        <Action why={why.plan} submit accept>
          Estimate and plan
        </Action>
        <Action why={props.hasModel ? '' : why.plan} onClick={props.onCopy}>
          Copy %swift_sft
        </Action>
        <Action why={why.launch} onClick={props.onLaunch}>
          {props.recommended ? 'Launch recommended plan' : 'Launch as written'}
        </Action>
      </div>
      {shown && (
        <p id={WHY_ID} className="jp-QuotaPlanner-why">
          {shown}
        </p>
      )}
    </>
  );
}

/** A button, disabled while `why` says why (on hover and to assistive technology). */
function Action(props: {
  why: string;
  submit?: boolean;
  accept?: boolean;
  onClick?: () => void;
  children: React.ReactNode;
}): JSX.Element {
  return (
    <button
      type={props.submit ? 'submit' : 'button'}
      className={`jp-mod-styled${props.accept ? ' jp-mod-accept' : ''} jp-QuotaButton`}
      disabled={!!props.why}
      title={props.why || undefined}
      aria-describedby={props.why ? WHY_ID : undefined}
      onClick={props.onClick}
    >
      {props.children}
    </button>
  );
}
