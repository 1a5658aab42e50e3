/**
 * What the planner form got back: the launch's outcome, the estimate against
 * one GPU's memory, and the plan for the namespace (or why there is none).
 */

import * as React from 'react';

import { IEstimate, IPlanResult } from '../tokens';
import { EstimateBar } from './EstimateBar';
import { Answer } from './plannerClient';
import { IVerificationClient } from './PlanVerification';
import { PlanView } from './PlanView';
import { Outcome } from './task';

export interface IPlannerResultsProps {
  /** The launch's outcome ('' before one), or why it failed. */
  launched: string;
  launchError: string;
  estimate: Answer<IEstimate> | null;
  plan: Answer<IPlanResult> | null;
  namespace: string;
  gpuMemory: number | null;
  verifier: IVerificationClient;
}

export function PlannerResults(props: IPlannerResultsProps): JSX.Element {
  const { estimate, plan } = props;
  return (
    <>
      <Outcome
        status={props.launched}
        failure={props.launchError}
        statusClassName="jp-QuotaPlanner-launched"
        failureClassName="jp-QuotaPlanner-refusal"
      />
      {estimate && (
        <div className="jp-QuotaPlanner-estimate" aria-live="polite">
          <h4>Estimate for these arguments</h4>
          {estimate.kind === 'ok' ? (
            <EstimateBar
              estimate={estimate.value}
              gpuMemory={props.gpuMemory}
              label="Estimate"
            />
          ) : (
            <p className={`jp-QuotaPlanner-${estimate.kind}`}>
              {estimate.message}
            </p>
          )}
        </div>
      )}
      {plan &&
        (plan.kind === 'ok' ? (
          <PlanView
            result={plan.value}
            namespace={props.namespace}
            gpuMemory={props.gpuMemory}
            verifier={props.verifier}
          />
        ) : (
          <p className={`jp-QuotaPlanner-${plan.kind}`}>{plan.message}</p>
        ))}
    </>
  );
}
