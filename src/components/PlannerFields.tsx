/**
 * The planner form's fields: namespace (when there are several), model
 * (catalog names offered as you type), tuner, max length, batch size, GPUs,
 * dataset and further arguments.
 */

import * as React from 'react';

import { IModelSuggestion } from '../catalog';
import { IPlanRequest, TUNERS, Tuner } from '../jobs';

export interface IPlannerFieldsProps {
  request: IPlanRequest;
  update: (change: Partial<IPlanRequest>) => void;
  namespaces: string[];
  namespace: string;
  chooseNamespace: (namespace: string) => void;
  suggestions: IModelSuggestion[];
}

export function PlannerFields(props: IPlannerFieldsProps): JSX.Element {
  const { request, update, namespaces } = props;
  return (
    <>
      {namespaces.length > 1 && (
        <Field label="Namespace" id="jp-QuotaPlanner-namespace">
          <select
            id="jp-QuotaPlanner-namespace"
            className="jp-mod-styled"
            value={props.namespace}
            onChange={e => props.chooseNamespace(e.target.value)}
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
          // "e.g.": an example to follow, not a value already filled in.
          placeholder="e.g. Qwen/Qwen2.5-7B-Instruct"
          value={request.model}
          onChange={e => update({ model: e.target.value })}
        />
        <datalist id="jp-QuotaPlanner-models">
          {props.suggestions.map(m => (
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
          placeholder="e.g. --num_train_epochs 3"
          onChange={e => update({ extra: e.target.value })}
        />
      </Field>
    </>
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
