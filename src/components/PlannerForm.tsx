/**
 * The planner form: a model, tuner, max length, batch size and GPUs
 * (`PlannerFields`). It shows the estimate against one GPU's memory and the
 * plan for the namespace (`PlannerResults`), copies the matching
 * `%swift_sft` line, and launches the plan (or, without a planner on the
 * server, the arguments as written) (`PlannerActions`).
 */

import * as React from 'react';

import { IPlanRequest, magicLine, swiftArgs } from '../jobs';
import { QuotaModel } from '../model';
import { IEstimate, IJobRequest, IPlanResult } from '../tokens';
import {
  answer,
  Answer,
  IPlannerClient,
  useGpuMemory,
  useModelSuggestions
} from './plannerClient';
import { PlannerActions } from './PlannerActions';
import { PlannerFields } from './PlannerFields';
import { PlannerResults } from './PlannerResults';
import { useTask } from './task';

export type { IPlannerClient } from './plannerClient';

export interface IPlannerFormProps {
  model: QuotaModel;
  client: IPlannerClient;
  copy: (text: string) => void;
}

const INITIAL: IPlanRequest = {
  model: '',
  tuner: 'lora',
  maxLength: 2048,
  batchSize: 1,
  gpus: 1,
  dataset: '',
  extra: ''
};

export function PlannerForm(props: IPlannerFormProps): JSX.Element {
  const { model, client } = props;
  const namespaces = model.namespaces.map(n => n.name);
  const [chosen, setChosen] = React.useState('');
  const namespace = pickNamespace(namespaces, chosen, model.statusNamespace);
  const [request, setRequest] = React.useState<IPlanRequest>(INITIAL);
  const [estimate, setEstimate] = React.useState<Answer<IEstimate> | null>(
    null
  );
  const [plan, setPlan] = React.useState<Answer<IPlanResult> | null>(null);
  const [launched, setLaunched] = React.useState('');
  const gpuMemory = useGpuMemory(client);
  const suggestions = useModelSuggestions(client);

  const args = swiftArgs(request);
  const recommended = plan?.kind === 'ok' ? plan.value.recommended : null;

  // Each answer settles itself (`answer`): the planning task never fails.
  const planning = useTask(async () => {
    const [e, p] = await Promise.all([
      answer(client.estimate(args, request.gpus)),
      answer(client.plan(namespace, args))
    ]);
    setEstimate(e);
    setPlan(p);
  });
  const launch = useTask(async (body: IJobRequest) => {
    const job = await model.submit(namespace, body);
    setLaunched(`Launched ${job.name} in ${namespace} (${job.phase}).`);
  });
  const busy = planning.busy || launch.busy;

  const update = (change: Partial<IPlanRequest>) => {
    setRequest({ ...request, ...change });
    setEstimate(null); // answers describe the fields they were asked for
    setPlan(null);
    setLaunched('');
    launch.reset();
  };

  const onSubmit = (event: React.FormEvent) => {
    event.preventDefault();
    setLaunched('');
    launch.reset();
    void planning.run();
  };

  const onLaunch = () => {
    setLaunched('');
    void launch.run(
      recommended
        ? {
            args: recommended.args,
            gpus: recommended.gpus,
            resources: recommended.resources ?? undefined
          }
        : { args, gpus: request.gpus }
    );
  };

  const onCopy = () => {
    props.copy(
      recommended
        ? magicLine(namespace, recommended, true)
        : magicLine(namespace, { args, gpus: request.gpus }, false)
    );
  };

  return (
    <form
      className="jp-QuotaPlanner"
      aria-label="Plan a fine-tune"
      onSubmit={onSubmit}
    >
      <PlannerFields
        request={request}
        update={update}
        namespaces={namespaces}
        namespace={namespace}
        chooseNamespace={setChosen}
        suggestions={suggestions}
      />
      <PlannerActions
        busy={busy}
        hasModel={request.model.trim() !== ''}
        namespace={namespace}
        recommended={!!recommended}
        onCopy={onCopy}
        onLaunch={onLaunch}
      />
      <PlannerResults
        launched={launched}
        launchError={launch.error}
        estimate={estimate}
        plan={plan}
        namespace={namespace}
        gpuMemory={gpuMemory}
        verifier={client}
      />
    </form>
  );
}

/** The namespace chosen, else the status bar's, else the first. */
function pickNamespace(
  namespaces: string[],
  chosen: string,
  statusNamespace: string
): string {
  if (namespaces.includes(chosen)) {
    return chosen;
  }
  return namespaces.includes(statusNamespace)
    ? statusNamespace
    : (namespaces[0] ?? '');
}
