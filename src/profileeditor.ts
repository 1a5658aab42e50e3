/**
 * The admin view's profile editor, without a view: the team profiles as
 * stored, the admin's draft of one of them (its quota fields, or the whole
 * profile as JSON), and the answer of the last save.
 *
 * A refused save keeps the draft and holds the API's `{reason, message}`, so
 * the form shows the server's own words beside what the admin typed. The
 * server validates; nothing here second-guesses a quantity.
 *
 * It imports nothing from JupyterLab at run time, so it is unit-tested in
 * plain Node with a fake client.
 */

import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { asModelError, IModelError } from './model';
import { IProfile, IProfileList, IResourceList } from './tokens';

/**
 * What the editor needs from the server (`QuotaClient` in `client.ts`).
 */
export interface IProfileClient {
  profiles(): Promise<IProfileList>;
  putProfile(team: string, profile: IProfile): Promise<IProfile>;
}

/**
 * One quota key of the draft. `fixed` rows (the profile's own keys and the
 * usual GPU, CPU and memory keys) have a set key; an empty value leaves the
 * key out of the quota.
 */
export interface IHardRow {
  key: string;
  value: string;
  fixed: boolean;
}

/** How the draft is edited: quota fields, or the whole profile as JSON. */
export type EditMode = 'fields' | 'json';

export namespace ProfileEditor {
  export interface IOptions {
    client: IProfileClient;
    /** Called after a save succeeded (the balances are read again at once). */
    onSaved?: (profile: IProfile) => void | Promise<void>;
  }
}

/** The reason of a draft that is not a JSON object (found before any request). */
export const INVALID_JSON = 'InvalidJSON';

export class ProfileEditor implements IDisposable {
  constructor(options: ProfileEditor.IOptions) {
    this._client = options.client;
    this._onSaved = options.onSaved;
  }

  /** Emitted on every change of what the form shows. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The stored profiles, by team name. */
  get profiles(): IProfile[] {
    return this._profiles;
  }

  /** The team being edited ('' before the profiles are read). */
  get team(): string {
    return this._team;
  }

  /** The selected team's profile as stored. */
  get stored(): IProfile | null {
    return this._profiles.find(p => p.team === this._team) ?? null;
  }

  get mode(): EditMode {
    return this._mode;
  }

  /** The draft's quota keys (fields mode). */
  get rows(): ReadonlyArray<IHardRow> {
    return this._rows;
  }

  /** The draft as JSON text (JSON mode). */
  get json(): string {
    return this._json;
  }

  /** Why the last save or load failed: the API's `{status, reason, message}`. */
  get error(): IModelError | null {
    return this._error;
  }

  /** What the last successful save did, for a status line. */
  get saved(): string {
    return this._saved;
  }

  /** The last save's warnings (the teams' GPU quotas pass the inventory). */
  get warnings(): string[] {
    return this._saved ? this._warnings : [];
  }

  /** True while a read or a save is in flight. */
  get busy(): boolean {
    return this._busy;
  }

  /** True when the draft differs from the stored profile. */
  get dirty(): boolean {
    const stored = this.stored;
    if (!stored) {
      return false;
    }
    if (this._mode === 'json') {
      return this._json !== asJson(stored);
    }
    return !sameList(hardOf(this._rows), stored.hard ?? {});
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /**
   * Read the profiles (`GET profiles`) and start a fresh draft of the
   * selected team (the first team when none is selected or it is gone).
   */
  async load(): Promise<void> {
    this._setBusy(true);
    try {
      const list = await this._client.profiles();
      this._profiles = sortByTeam(list.profiles);
      this._error = null;
      const teams = this._profiles.map(p => p.team ?? '');
      this._reset(teams.includes(this._team) ? this._team : (teams[0] ?? ''));
    } catch (error) {
      this._error = asModelError(error);
    } finally {
      this._setBusy(false);
    }
  }

  /** Edit another team; the draft starts from its stored profile. */
  select(team: string): void {
    if (team !== this._team) {
      this._reset(team);
      this._saved = '';
      this._emit();
    }
  }

  /** Set the value of row `index` ('' leaves the key out). */
  setValue(index: number, value: string): void {
    this._editRow(index, { value });
  }

  /** Set the key of an added row. */
  setKey(index: number, key: string): void {
    if (!this._rows[index]?.fixed) {
      this._editRow(index, { key });
    }
  }

  /** Add an empty row for another quota key. */
  addRow(): void {
    this._rows = [...this._rows, { key: '', value: '', fixed: false }];
    this._emit();
  }

  /** Remove an added row. */
  removeRow(index: number): void {
    if (this._rows[index] && !this._rows[index].fixed) {
      this._rows = this._rows.filter((_, i) => i !== index);
      this._emit();
    }
  }

  /** Replace the JSON draft. */
  setJson(text: string): void {
    this._json = text;
    this._saved = '';
    this._emit();
  }

  /**
   * Edit as fields or as JSON; the draft carries over. Going back to fields
   * needs a JSON object: otherwise the error says why and the mode stays.
   */
  setMode(mode: EditMode): void {
    if (mode === this._mode) {
      return;
    }
    if (mode === 'json') {
      this._json = asJson(this._fieldsDraft());
    } else {
      const parsed = parseProfile(this._json);
      if ('error' in parsed) {
        this._error = parsed.error;
        this._emit();
        return;
      }
      this._rows = rowsOf(parsed.profile);
    }
    this._mode = mode;
    this._error = null;
    this._emit();
  }

  /**
   * `PUT profiles/{team}` with the draft. On success the stored profile and
   * the draft become the server's answer and `onSaved` runs; on a refusal the
   * draft stays as typed and `error` holds the API's message.
   *
   * @returns whether the profile was saved.
   */
  async save(): Promise<boolean> {
    const team = this._team;
    if (!team || this._busy) {
      return false;
    }
    let body: IProfile;
    if (this._mode === 'json') {
      const parsed = parseProfile(this._json);
      if ('error' in parsed) {
        this._error = parsed.error;
        this._saved = '';
        this._emit();
        return false;
      }
      body = parsed.profile;
    } else {
      body = this._fieldsDraft();
    }
    this._saved = '';
    this._setBusy(true);
    let profile: IProfile;
    try {
      // the warnings are the answer's, not the profile's: a later save leaves them out
      const { warnings, ...stored } = await this._client.putProfile(team, body);
      profile = stored;
      this._warnings = warnings ?? [];
    } catch (error) {
      this._error = asModelError(error);
      this._setBusy(false);
      return false;
    }
    this._profiles = sortByTeam([
      ...this._profiles.filter(p => p.team !== team),
      profile
    ]);
    this._error = null;
    this._saved = `Saved team ${team}.`;
    if (this._team === team) {
      this._reset(team);
    }
    this._setBusy(false);
    await this._onSaved?.(profile);
    return true;
  }

  dispose(): void {
    if (!this._disposed) {
      this._disposed = true;
      Signal.clearData(this);
    }
  }

  /** The stored profile with the draft's quota keys. */
  private _fieldsDraft(): IProfile {
    return {
      ...(this.stored ?? { team: this._team }),
      hard: hardOf(this._rows)
    };
  }

  private _reset(team: string): void {
    this._team = team;
    const stored = this.stored;
    this._rows = stored ? rowsOf(stored) : [];
    this._json = stored ? asJson(stored) : '';
    this._error = null;
  }

  private _editRow(index: number, change: Partial<IHardRow>): void {
    if (!this._rows[index]) {
      return;
    }
    this._rows = this._rows.map((row, i) =>
      i === index ? { ...row, ...change } : row
    );
    this._saved = '';
    this._emit();
  }

  private _setBusy(busy: boolean): void {
    this._busy = busy;
    this._emit();
  }

  private _emit(): void {
    if (!this._disposed) {
      this._changed.emit();
    }
  }

  private _client: IProfileClient;
  private _onSaved?: (profile: IProfile) => void | Promise<void>;
  private _profiles: IProfile[] = [];
  private _team = '';
  private _mode: EditMode = 'fields';
  private _rows: IHardRow[] = [];
  private _json = '';
  private _error: IModelError | null = null;
  private _saved = '';
  private _warnings: string[] = [];
  private _busy = false;
  private _disposed = false;
  private _changed = new Signal<this, void>(this);
}

/**
 * The quota keys a form always offers: the team's GPU requests, CPU requests
 * and memory limits (the keys the demo teams and the README use).
 */
export function usualKeys(profile: IProfile): string[] {
  return [
    `requests.${profile.gpuResource || 'nvidia.com/gpu'}`,
    'requests.cpu',
    'limits.memory'
  ];
}

/** The rows of a profile: the usual keys first, then its other keys. */
export function rowsOf(profile: IProfile): IHardRow[] {
  const hard = profile.hard ?? {};
  const keys = usualKeys(profile);
  for (const key of Object.keys(hard).sort()) {
    if (!keys.includes(key)) {
      keys.push(key);
    }
  }
  return keys.map(key => ({ key, value: hard[key] ?? '', fixed: true }));
}

/** The quota of the rows: every row with a key and a value, as typed. */
export function hardOf(rows: ReadonlyArray<IHardRow>): IResourceList {
  const hard: IResourceList = {};
  for (const { key, value } of rows) {
    if (key.trim() !== '' && value !== '') {
      hard[key.trim()] = value;
    }
  }
  return hard;
}

/**
 * A JSON draft as a profile, or the error that says why it is not one.
 */
export function parseProfile(
  text: string
): { profile: IProfile } | { error: IModelError } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return {
      error: {
        status: 0,
        reason: INVALID_JSON,
        message: `The profile is not valid JSON: ${asModelError(error).message}`
      }
    };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      error: {
        status: 0,
        reason: INVALID_JSON,
        message: 'The profile must be a JSON object of its fields.'
      }
    };
  }
  return { profile: value as IProfile };
}

function asJson(profile: IProfile): string {
  return JSON.stringify(profile, null, 2);
}

function sortByTeam(profiles: IProfile[]): IProfile[] {
  return [...profiles].sort((a, b) =>
    (a.team ?? '').localeCompare(b.team ?? '')
  );
}

function sameList(a: IResourceList, b: IResourceList): boolean {
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length && keys.every(k => b[k] === a[k])
  );
}
