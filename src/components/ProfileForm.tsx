/**
 * The admin view's profile form: pick a team, edit its quota (ResourceQuota
 * `hard`) key by key or the whole profile as JSON, and save. The state lives
 * in a `ProfileEditor`, so a poll that redraws the view never resets the
 * admin's edit; a refused save shows the API's message under the form.
 */

import * as React from 'react';

import { activeIncreases, increaseAmounts, localTime } from '../increases';
import { ProfileEditor } from '../profileeditor';
import { describeKey } from '../quantity';
import { IIncrease } from '../tokens';
import { useChanged } from './hooks';

export interface IProfileFormProps {
  editor: ProfileEditor;
  /** Every team's increase requests: the form says which ones the balances add. */
  increases?: IIncrease[];
  now?: number;
}

const ERROR_ID = 'jp-QuotaProfileForm-error';

export function ProfileForm(props: IProfileFormProps): JSX.Element {
  const { editor } = props;
  useChanged(editor);
  const error = editor.error;
  const teams = editor.profiles.map(p => p.team ?? '');

  const onSubmit = (event: React.FormEvent) => {
    event.preventDefault();
    void editor.save();
  };

  if (teams.length === 0) {
    return error ? (
      <p className="jp-QuotaProfileForm-error" role="alert">
        Could not read the team profiles: {error.message}
      </p>
    ) : (
      <p className="jp-QuotaSidebar-empty" role="status">
        {editor.busy
          ? 'Reading the team profiles…'
          : 'No team profile is configured.'}
      </p>
    );
  }

  return (
    <form
      className="jp-QuotaProfileForm"
      aria-label="Edit a team profile"
      aria-describedby={error ? ERROR_ID : undefined}
      onSubmit={onSubmit}
    >
      <div className="jp-QuotaPlanner-field">
        <label htmlFor="jp-QuotaProfileForm-team">Team</label>
        <select
          id="jp-QuotaProfileForm-team"
          className="jp-mod-styled"
          value={editor.team}
          onChange={e => editor.select(e.target.value)}
        >
          {editor.profiles.map(p => (
            <option key={p.team} value={p.team}>
              {p.team} ({p.namespace})
            </option>
          ))}
        </select>
      </div>
      <label className="jp-QuotaProfileForm-mode">
        <input
          type="checkbox"
          checked={editor.mode === 'json'}
          onChange={e => editor.setMode(e.target.checked ? 'json' : 'fields')}
        />{' '}
        Edit the whole profile as JSON
      </label>
      {editor.mode === 'json' ? (
        <JsonField editor={editor} />
      ) : (
        <HardFields editor={editor} />
      )}
      <BaseNote
        namespace={
          editor.profiles.find(p => p.team === editor.team)?.namespace ?? ''
        }
        increases={props.increases ?? []}
        now={props.now ?? Date.now()}
      />
      <div className="jp-QuotaPlanner-actions">
        <button
          type="submit"
          className="jp-mod-styled jp-mod-accept jp-QuotaButton"
          disabled={editor.busy || !editor.team}
        >
          Save
        </button>
        <button
          type="button"
          className="jp-mod-styled jp-QuotaButton"
          title="Read the team profiles again; unsaved edits are dropped"
          disabled={editor.busy}
          onClick={() => void editor.load()}
        >
          Reload
        </button>
      </div>
      {error && (
        <p id={ERROR_ID} className="jp-QuotaProfileForm-error" role="alert">
          {error.message}
        </p>
      )}
      {editor.saved && (
        <p className="jp-QuotaProfileForm-saved" role="status">
          {editor.saved}
        </p>
      )}
      {editor.warnings.length > 0 && (
        <ul
          className="jp-QuotaSidebar-warnings"
          aria-label="Warnings on the save"
        >
          {editor.warnings.map(warning => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      )}
    </form>
  );
}

/**
 * One input per quota key: the usual GPU, CPU and memory keys and the
 * profile's others (empty: no limit), and rows the admin adds.
 */
function HardFields(props: { editor: ProfileEditor }): JSX.Element {
  const { editor } = props;
  const message = editor.error?.message ?? '';
  return (
    <fieldset className="jp-QuotaProfileForm-hard">
      <legend>Base quota (ResourceQuota hard); empty: no limit</legend>
      {editor.rows.map((row, index) => {
        const id = `jp-QuotaProfileForm-hard-${index}`;
        // The API names the key it refuses as `spec.hard[<key>]`.
        const invalid = row.key !== '' && message.includes(`[${row.key}]`);
        const info = describeKey(row.key);
        return (
          <div
            key={index}
            className="jp-QuotaProfileForm-row"
            data-key={row.key}
          >
            {row.fixed ? (
              <label htmlFor={id}>
                {info.label}
                {info.side && ` ${info.side}`} <code>{row.key}</code>
              </label>
            ) : (
              <input
                className="jp-mod-styled jp-QuotaProfileForm-key"
                aria-label={`Quota key of row ${index + 1}`}
                placeholder="requests.storage"
                value={row.key}
                onChange={e => editor.setKey(index, e.target.value)}
              />
            )}
            <input
              id={id}
              className="jp-mod-styled"
              aria-label={
                row.fixed ? undefined : `Quantity of row ${index + 1}`
              }
              aria-invalid={invalid || undefined}
              aria-describedby={invalid ? ERROR_ID : undefined}
              placeholder="no limit"
              spellCheck={false}
              value={row.value}
              onChange={e => editor.setValue(index, e.target.value)}
            />
            {!row.fixed && (
              <button
                type="button"
                className="jp-mod-styled jp-QuotaButton"
                aria-label={`Remove row ${index + 1}`}
                onClick={() => editor.removeRow(index)}
              >
                Remove
              </button>
            )}
          </div>
        );
      })}
      <button
        type="button"
        className="jp-mod-styled jp-QuotaButton"
        onClick={() => editor.addRow()}
      >
        Add a quota key
      </button>
    </fieldset>
  );
}

/**
 * Why the balances above may show more than this form: the form edits the
 * base quota, and approved temporary increases add to it until they expire.
 */
function BaseNote(props: {
  namespace: string;
  increases: IIncrease[];
  now: number;
}): JSX.Element {
  const active = activeIncreases(props.increases, props.namespace, props.now);
  return (
    <p className="jp-QuotaProfileForm-base" role="note">
      This is the base quota.
      {active.length === 0 ? (
        ' Approved temporary increases add to it until they expire.'
      ) : (
        <>
          {` The balance of ${props.namespace} above adds its temporary increases: `}
          {active.map((item, i) => (
            <React.Fragment key={item.name}>
              {i > 0 && '; '}
              {increaseAmounts(item.resources)
                .map(a => a.text)
                .join(', ')}{' '}
              until{' '}
              <time dateTime={item.expiresAt!} title={item.expiresAt!}>
                {localTime(item.expiresAt!, props.now)}
              </time>{' '}
              ({item.name})
            </React.Fragment>
          ))}
          .
        </>
      )}
    </p>
  );
}

/** The whole profile as JSON: every field `PUT profiles/{team}` takes. */
function JsonField(props: { editor: ProfileEditor }): JSX.Element {
  const { editor } = props;
  return (
    <div className="jp-QuotaPlanner-field">
      <label htmlFor="jp-QuotaProfileForm-json">Profile (JSON)</label>
      <textarea
        id="jp-QuotaProfileForm-json"
        className="jp-mod-styled jp-QuotaProfileForm-json"
        rows={18}
        spellCheck={false}
        aria-invalid={!!editor.error || undefined}
        aria-describedby={editor.error ? ERROR_ID : undefined}
        value={editor.json}
        onChange={e => editor.setJson(e.target.value)}
      />
    </div>
  );
}
