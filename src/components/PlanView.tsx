/**
 * The planner's answer: the recommended plan (what it changed and why, its
 * estimate) and the candidates that do not fit, each with the reason.
 */

import * as React from 'react';

import { changeText } from '../jobs';
import { IPlanResult } from '../tokens';
import { EstimateBar } from './EstimateBar';
import { IVerificationClient, PlanVerification } from './PlanVerification';

export interface IPlanViewProps {
  result: IPlanResult;
  namespace: string;
  gpuMemory: number | null;
  /** Runs the recommended plan's verification (a simulated step) on request. */
  verifier: IVerificationClient;
}

export function PlanView(props: IPlanViewProps): JSX.Element {
  const { result, namespace, gpuMemory, verifier } = props;
  const plan = result.recommended;
  const rejected = result.rejected;
  return (
    <div className="jp-QuotaPlan" aria-live="polite">
      <h4>Recommended plan</h4>
      {plan ? (
        <div className="jp-QuotaPlan-recommended" data-gpus={plan.gpus}>
          <p className="jp-QuotaPlan-summary">{plan.summary}</p>
          {plan.marginal && (
            <p className="jp-QuotaPlan-marginal" role="note">
              Marginal: the upper end of its range leaves less than 2% of the
              GPU&apos;s memory free, and no safer plan as close to the request
              fits.
            </p>
          )}
          {plan.changes.length > 0 && (
            <ul
              className="jp-QuotaPlan-changes"
              aria-label="What the planner changed"
            >
              {plan.changes.map((c, i) => (
                <li key={i}>{changeText(c)}</li>
              ))}
            </ul>
          )}
          {plan.estimate && (
            <EstimateBar
              estimate={plan.estimate}
              gpuMemory={gpuMemory}
              label="Recommended plan"
            />
          )}
          <code className="jp-QuotaPlan-args">{plan.args.join(' ')}</code>
          <PlanVerification
            client={verifier}
            args={plan.args}
            gpus={plan.gpus}
            estimate={plan.estimate ?? null}
          />
        </div>
      ) : (
        <p className="jp-QuotaPlan-none">
          Nothing fits what {namespace} has left.
        </p>
      )}
      {rejected.length > 0 && (
        <>
          <h4>Rejected alternatives</h4>
          <ul className="jp-QuotaPlan-rejected">
            {rejected.map((r, i) => (
              <li key={i}>
                <span className="jp-QuotaPlan-alt">{r.plan.summary}</span>
                <span className="jp-QuotaPlan-why">{r.reason}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
