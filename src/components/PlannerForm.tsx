/**
 * The planner form: a model (catalog names offered as you type, or a path),
 * tuner, max length, batch size and GPUs. It shows the estimate against one
 * GPU's memory and the plan for the namespace, copies the matching
 * `%swift_sft` line, and launches the plan (or, without a planner on the
 * server, the arguments as written).
 */

import * as React from 'react';

import { IModelSuggestion, modelSuggestions } from '../catalog';
import { IPlanRequest, magicLine, swiftArgs, TUNERS, Tuner } from '../jobs';
import { asModelError, QuotaModel } from '../model';
import { parseQuantity } from '../quantity';
import {
  IEstimate,
  IInventory,
  IJobRequest,
  IModelList,
  IPlanResult
} from '../tokens';
import { EstimateBar } from './EstimateBar';
import { PlanView } from './PlanView';

export interface IPlannerClient {
  estimate(args: string[], gpus: number): Promise<IEstimate>;
  plan(namespace: string, args: string[]): Promise<IPlanResult>;
  inventory(): Promise<IInventory>;
  models(): Promise<IModelList>;
}

export interface IPlannerFormProps {
  model: QuotaModel;
  client: IPlannerClient;
  copy: (text: string) => void;
}

/** An answer from an endpoint that may not exist on this server yet. */
type Answer<T> =
  | { kind: 'ok'; value: T }
  | { kind: 'unavailable'; message: string }
  | { kind: 'error'; message: string };

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
  const namespace = namespaces.includes(chosen)
    ? chosen
    : namespaces.includes(model.statusNamespace)
      ? model.statusNamespace
      : (namespaces[0] ?? '');
  const [request, setRequest] = React.useState<IPlanRequest>(INITIAL);
  const [estimate, setEstimate] = React.useState<Answer<IEstimate> | null>(
    null
  );
  const [plan, setPlan] = React.useState<Answer<IPlanResult> | null>(null);
  const [busy, setBusy] = React.useState(false);
  const [launch, setLaunch] = React.useState<{
    ok: boolean;
    message: string;
  } | null>(null);
  const gpuMemory = useGpuMemory(client);
  const suggestions = useModelSuggestions(client);

  const args = swiftArgs(request);
  const recommended = plan?.kind === 'ok' ? plan.value.recommended : null;

  const update = (change: Partial<IPlanRequest>) => {
    setRequest({ ...request, ...change });
    setEstimate(null); // answers describe the fields they were asked for
    setPlan(null);
    setLaunch(null);
  };

  const onSubmit = async (event: React.FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setLaunch(null);
    const [e, p] = await Promise.all([
      answer(client.estimate(args, request.gpus)),
      answer(client.plan(namespace, args))
    ]);
    setEstimate(e);
    setPlan(p);
    setBusy(false);
  };

  const onLaunch = async () => {
    const body: IJobRequest = recommended
      ? {
          args: recommended.args,
          gpus: recommended.gpus,
          resources: recommended.resources ?? undefined
        }
      : { args, gpus: request.gpus };
    setBusy(true);
    try {
      const job = await model.submit(namespace, body);
      setLaunch({
        ok: true,
        message: `Launched ${job.name} in ${namespace} (${job.phase}).`
      });
    } catch (error) {
      setLaunch({ ok: false, message: asModelError(error).message });
    } finally {
      setBusy(false);
    }
  };

  const onCopy = () => {
    const line = recommended
      ? magicLine(namespace, recommended, true)
      : magicLine(namespace, { args, gpus: request.gpus }, false);
    props.copy(line);
  };

  const hasModel = request.model.trim() !== '';
  return (
    <form
      className="jp-QuotaPlanner"
      aria-label="Plan a fine-tune"
      onSubmit={e => void onSubmit(e)}
    >
      {namespaces.length > 1 && (
        <Field label="Namespace" id="jp-QuotaPlanner-namespace">
          <select
            id="jp-QuotaPlanner-namespace"
            className="jp-mod-styled"
            value={namespace}
            onChange={e => setChosen(e.target.value)}
          >
            {namespaces.map(n => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </Field>
      )}
      <Field
        label="Model"
        id="jp-QuotaPlanner-model"
        hint="A catalog name, hub id or local folder"
      >
        <input
          id="jp-QuotaPlanner-model"
          className="jp-mod-styled"
          list="jp-QuotaPlanner-models"
          required
          placeholder="Qwen/Qwen2.5-7B-Instruct"
          value={request.model}
          onChange={e => update({ model: e.target.value })}
        />
        <datalist id="jp-QuotaPlanner-models">
          {suggestions.map(m => (
            <option key={m.value} value={m.value}>
              {m.label}
            </option>
          ))}
        </datalist>
      </Field>
      <Field label="Tuner" id="jp-QuotaPlanner-tuner">
        <select
          id="jp-QuotaPlanner-tuner"
          className="jp-mod-styled"
          value={request.tuner}
          onChange={e => update({ tuner: e.target.value as Tuner })}
        >
          {TUNERS.map(t => (
            <option key={t.value} value={t.value}>
              {t.label}
            </option>
          ))}
        </select>
      </Field>
      <div className="jp-QuotaPlanner-row">
        <NumberField
          label="Max length"
          id="jp-QuotaPlanner-maxLength"
          value={request.maxLength}
          onChange={v => update({ maxLength: v })}
        />
        <NumberField
          label="Batch size"
          id="jp-QuotaPlanner-batchSize"
          value={request.batchSize}
          onChange={v => update({ batchSize: v })}
        />
        <NumberField
          label="GPUs"
          id="jp-QuotaPlanner-gpus"
          value={request.gpus}
          onChange={v => update({ gpus: v })}
        />
      </div>
      <Field label="Dataset" id="jp-QuotaPlanner-dataset" hint="Optional">
        <input
          id="jp-QuotaPlanner-dataset"
          className="jp-mod-styled"
          value={request.dataset}
          onChange={e => update({ dataset: e.target.value })}
        />
      </Field>
      <Field
        label="Other arguments"
        id="jp-QuotaPlanner-extra"
        hint="More swift sft arguments, as typed"
      >
        <input
          id="jp-QuotaPlanner-extra"
          className="jp-mod-styled"
          value={request.extra}
          placeholder="--num_train_epochs 3"
          onChange={e => update({ extra: e.target.value })}
        />
      </Field>
      <div className="jp-QuotaPlanner-actions">
        <button
          type="submit"
          className="jp-mod-styled jp-mod-accept jp-QuotaButton"
          disabled={busy || !hasModel}
        >
          Estimate and plan
        </button>
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          disabled={!hasModel}
          onClick={onCopy}
        >
          Copy %swift_sft
        </button>
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          disabled={busy || !hasModel || !namespace}
          onClick={() => void onLaunch()}
        >
          {recommended ? 'Launch recommended plan' : 'Launch as written'}
        </button>
      </div>
      {launch && (
        <p
          className={
            launch.ok ? 'jp-QuotaPlanner-launched' : 'jp-QuotaPlanner-refusal'
          }
          role={launch.ok ? 'status' : 'alert'}
        >
          {launch.message}
        </p>
      )}
      {estimate && (
        <div className="jp-QuotaPlanner-estimate" aria-live="polite">
          <h4>Estimate for these arguments</h4>
          {estimate.kind === 'ok' ? (
            <EstimateBar
              estimate={estimate.value}
              gpuMemory={gpuMemory}
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
            namespace={namespace}
            gpuMemory={gpuMemory}
          />
        ) : (
          <p className={`jp-QuotaPlanner-${plan.kind}`}>{plan.message}</p>
        ))}
    </form>
  );
}

function Field(props: {
  label: string;
  id: string;
  hint?: string;
  children: React.ReactNode;
}): JSX.Element {
  return (
    <div className="jp-QuotaPlanner-field">
      <label htmlFor={props.id}>
        {props.label}
        {props.hint && (
          <span className="jp-QuotaPlanner-hint"> {props.hint}</span>
        )}
      </label>
      {props.children}
    </div>
  );
}

function NumberField(props: {
  label: string;
  id: string;
  value: number;
  onChange: (value: number) => void;
}): JSX.Element {
  return (
    <Field label={props.label} id={props.id}>
      <input
        id={props.id}
        className="jp-mod-styled"
        type="number"
        min={1}
        step={1}
        required
        value={props.value}
        onChange={e =>
          props.onChange(Math.max(1, parseInt(e.target.value) || 1))
        }
      />
    </Field>
  );
}

/**
 * One GPU's memory in bytes, from the inventory (null until read or unknown).
 */
/** The catalog from the server; the static list until it answers, or if it cannot. */
function useModelSuggestions(client: IPlannerClient): IModelSuggestion[] {
  const [suggestions, setSuggestions] = React.useState(() =>
    modelSuggestions(null)
  );
  React.useEffect(() => {
    client.models().then(
      list => setSuggestions(modelSuggestions(list.models)),
      () => setSuggestions(modelSuggestions(null))
    );
  }, [client]);
  return suggestions;
}

function useGpuMemory(client: IPlannerClient): number | null {
  const [memory, setMemory] = React.useState<number | null>(null);
  React.useEffect(() => {
    client.inventory().then(
      inv => {
        const text = inv.gpus?.[0]?.memory;
        setMemory(text ? parseQuantity(text) : null);
      },
      () => setMemory(null)
    );
  }, [client]);
  return memory;
}

/**
 * Settle a request: a 404 from a server without the route (or a 501) is
 * `unavailable`, any other failure an `error` with the API's message.
 */
async function answer<T>(promise: Promise<T>): Promise<Answer<T>> {
  try {
    return { kind: 'ok', value: await promise };
  } catch (e) {
    const error = asModelError(e);
    if (error.reason === 'ServerExtensionMissing' || error.status === 501) {
      return {
        kind: 'unavailable',
        message:
          'This server has no estimator or planner yet (the route answered ' +
          `${error.status}); upgrade jupyter_quota to plan here. "Launch as written" still submits.`
      };
    }
    return { kind: 'error', message: error.message };
  }
}
