import * as React from 'react';

import { ProfileForm } from '../components/ProfileForm';
import { TeamBalances } from '../components/TeamBalances';
import { INVALID_JSON, IProfileClient, ProfileEditor } from '../profileeditor';
import { QuotaApiError } from '../request';
import { INamespaceSummary, IProfile } from '../tokens';

// react-dom ships no types here; only its server renderer is used, in plain Node.
// eslint-disable-next-line @typescript-eslint/no-var-requires
const { renderToStaticMarkup } = require('react-dom/server') as {
  renderToStaticMarkup(element: React.ReactElement): string;
};

/** What the server answers for a GPU quota that is not a quantity (jupyter_quota/quota.py's words). */
const NOT_A_QUANTITY =
  'profile \'beta\': spec.hard[requests.nvidia.com/gpu]: Invalid value: "two": quantities must match ' +
  "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

function profile(team: string, hard: { [key: string]: string }): IProfile {
  return {
    team,
    namespace: `team-${team}`,
    displayName: `Team ${team}`,
    users: [`${team}-user`],
    hard,
    gpuResource: 'nvidia.com/gpu',
    quotaName: 'team-quota'
  };
}

class FakeProfiles implements IProfileClient {
  stored: IProfile[] = [
    profile('beta', {
      'requests.nvidia.com/gpu': '2',
      'requests.cpu': '8',
      'limits.memory': '64Gi'
    }),
    profile('alpha', {
      'requests.nvidia.com/gpu': '2',
      'count/jobs.batch': '5'
    })
  ];
  puts: [string, IProfile][] = [];
  refuseWith: string | null = null;
  warnings: string[] = [];

  async profiles() {
    return { profiles: this.stored.map(p => JSON.parse(JSON.stringify(p))) };
  }

  async putProfile(team: string, body: IProfile) {
    this.puts.push([team, JSON.parse(JSON.stringify(body))]);
    if (this.refuseWith) {
      throw new QuotaApiError(400, 'BadRequest', this.refuseWith);
    }
    const saved = { ...body, team };
    this.stored = [...this.stored.filter(p => p.team !== team), saved];
    return { ...saved, warnings: this.warnings };
  }
}

function render(editor: ProfileEditor): string {
  return renderToStaticMarkup(React.createElement(ProfileForm, { editor }));
}

/** The value attribute of the input labelled by row `index`. */
function inputValue(markup: string, index: number): string | null {
  const match = new RegExp(
    `<input id="jp-QuotaProfileForm-hard-${index}"[^>]*value="([^"]*)"`
  ).exec(markup);
  return match ? match[1] : null;
}

describe('ProfileEditor', () => {
  let client: FakeProfiles;
  let saved: IProfile[];
  let editor: ProfileEditor;

  beforeEach(async () => {
    client = new FakeProfiles();
    saved = [];
    editor = new ProfileEditor({ client, onSaved: p => void saved.push(p) });
    await editor.load();
  });

  afterEach(() => editor.dispose());

  it('loads the profiles by team and offers the usual quota keys, then the others', () => {
    expect(editor.profiles.map(p => p.team)).toEqual(['alpha', 'beta']);
    expect(editor.team).toBe('alpha');
    expect(editor.rows.map(r => [r.key, r.value])).toEqual([
      ['requests.nvidia.com/gpu', '2'],
      ['requests.cpu', ''],
      ['limits.memory', ''],
      ['count/jobs.batch', '5']
    ]);
    expect(editor.dirty).toBe(false);
  });

  it('saves the edited quota with the rest of the profile, then reads the balances again', async () => {
    editor.select('beta');
    editor.setValue(0, '3');
    expect(editor.dirty).toBe(true);

    expect(await editor.save()).toBe(true);

    expect(client.puts).toEqual([
      [
        'beta',
        {
          ...profile('beta', {
            'requests.nvidia.com/gpu': '3',
            'requests.cpu': '8',
            'limits.memory': '64Gi'
          })
        }
      ]
    ]);
    expect(editor.stored?.hard?.['requests.nvidia.com/gpu']).toBe('3');
    expect(editor.rows[0].value).toBe('3');
    expect(editor.dirty).toBe(false);
    expect(editor.error).toBeNull();
    expect(editor.saved).toBe('Saved team beta.');
    expect(saved.map(p => p.team)).toEqual(['beta']);
    expect(render(editor)).toContain(
      '<p class="jp-QuotaProfileForm-saved" role="status">Saved team beta.</p>'
    );
  });

  it("shows a save's warnings, and leaves them out of the profile and the next save", async () => {
    const warning =
      "with this profile the teams' requests.nvidia.com/gpu quotas add up to 5 GPUs, more than the 4 GPUs of the inventory";
    client.warnings = [warning];
    editor.setValue(0, '3');
    expect(await editor.save()).toBe(true);
    expect(editor.warnings).toEqual([warning]);
    expect(render(editor)).toContain(
      `<li>${warning.replace(/'/g, '&#x27;')}</li>`
    );
    expect(editor.stored).not.toHaveProperty('warnings');
    client.warnings = [];
    editor.setValue(0, '2');
    expect(await editor.save()).toBe(true);
    expect(client.puts[1][1]).not.toHaveProperty('warnings');
    expect(editor.warnings).toEqual([]);
  });

  it('keeps the edit and shows the API message beside the form when the save is refused', async () => {
    editor.select('beta');
    editor.setValue(0, 'two');
    client.refuseWith = NOT_A_QUANTITY;

    expect(await editor.save()).toBe(false);

    expect(client.puts[0][1].hard?.['requests.nvidia.com/gpu']).toBe('two');
    expect(editor.error).toEqual({
      status: 400,
      reason: 'BadRequest',
      message: NOT_A_QUANTITY
    });
    expect(editor.rows[0].value).toBe('two');
    expect(editor.dirty).toBe(true);
    expect(editor.stored?.hard?.['requests.nvidia.com/gpu']).toBe('2');
    expect(editor.saved).toBe('');
    expect(saved).toEqual([]);

    const markup = render(editor);
    const escaped = NOT_A_QUANTITY.replace(/&/g, '&amp;')
      .replace(/"/g, '&quot;')
      .replace(/'/g, '&#x27;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;');
    expect(markup).toContain(
      `<p id="jp-QuotaProfileForm-error" class="jp-QuotaProfileForm-error" role="alert">${escaped}</p>`
    );
    expect(markup).toContain('aria-describedby="jp-QuotaProfileForm-error"');
    expect(inputValue(markup, 0)).toBe('two');
    // The refused key is marked; the others are not.
    expect(markup).toMatch(
      /<input id="jp-QuotaProfileForm-hard-0"[^>]*aria-invalid="true"/
    );
    expect(markup).not.toMatch(
      /<input id="jp-QuotaProfileForm-hard-1"[^>]*aria-invalid/
    );

    // Fixing the value and saving again clears the message.
    client.refuseWith = null;
    editor.setValue(0, '1');
    expect(await editor.save()).toBe(true);
    expect(editor.error).toBeNull();
    expect(render(editor)).not.toContain('role="alert"');
  });

  it('leaves an emptied key out, and saves added keys', async () => {
    editor.select('beta');
    editor.setValue(1, '');
    editor.addRow();
    editor.setKey(3, 'requests.storage');
    editor.setValue(3, '1Ti');
    editor.addRow();
    editor.removeRow(4);
    editor.setKey(0, 'renamed'); // a fixed key stays

    await editor.save();

    expect(client.puts[0][1].hard).toEqual({
      'requests.nvidia.com/gpu': '2',
      'limits.memory': '64Gi',
      'requests.storage': '1Ti'
    });
  });

  it('edits the whole profile as JSON, starting from the field edits', async () => {
    editor.select('beta');
    editor.setValue(0, '4');
    editor.setMode('json');
    const draft = JSON.parse(editor.json);
    expect(draft.hard['requests.nvidia.com/gpu']).toBe('4');
    expect(draft.displayName).toBe('Team beta');

    editor.setJson(JSON.stringify({ ...draft, displayName: 'Team Beta (ML)' }));
    expect(await editor.save()).toBe(true);
    expect(client.puts[0][1]).toEqual({
      ...draft,
      displayName: 'Team Beta (ML)'
    });
    expect(editor.stored?.displayName).toBe('Team Beta (ML)');
  });

  it('says when the JSON draft is not an object, without a request, and keeps it', async () => {
    editor.setMode('json');
    editor.setJson('{"team": "alpha",');

    expect(await editor.save()).toBe(false);
    expect(client.puts).toEqual([]);
    expect(editor.error?.reason).toBe(INVALID_JSON);
    expect(editor.error?.message).toMatch(/^The profile is not valid JSON: /);
    expect(editor.json).toBe('{"team": "alpha",');

    editor.setMode('fields'); // cannot: the draft is not a profile
    expect(editor.mode).toBe('json');
    editor.setJson('[1]');
    expect(await editor.save()).toBe(false);
    expect(editor.error?.message).toBe(
      'The profile must be a JSON object of its fields.'
    );

    editor.setJson(JSON.stringify(profile('alpha', { 'requests.cpu': '16' })));
    editor.setMode('fields');
    expect(editor.mode).toBe('fields');
    expect(editor.rows.find(r => r.key === 'requests.cpu')?.value).toBe('16');
  });

  it('starts a fresh draft for another team and on reload', async () => {
    editor.setValue(0, '9');
    editor.select('beta');
    editor.select('alpha');
    expect(editor.rows[0].value).toBe('2');

    editor.setValue(0, '9');
    client.stored = client.stored.map(p =>
      p.team === 'alpha'
        ? profile('alpha', { 'requests.nvidia.com/gpu': '6' })
        : p
    );
    await editor.load();
    expect(editor.team).toBe('alpha');
    expect(editor.rows[0].value).toBe('6');
  });

  it('shows why the profiles could not be read', async () => {
    const refused = new ProfileEditor({
      client: {
        profiles: () =>
          Promise.reject(
            new QuotaApiError(
              403,
              'Forbidden',
              'user "ann" is not a quota admin'
            )
          ),
        putProfile: () => Promise.reject(new Error('unused'))
      }
    });
    await refused.load();
    expect(refused.error?.status).toBe(403);
    expect(render(refused)).toContain(
      'Could not read the team profiles: user &quot;ann&quot; is not a quota admin'
    );
    refused.dispose();
  });
});

describe('TeamBalances', () => {
  const summary: INamespaceSummary = {
    name: 'team-beta',
    team: 'beta',
    gpuResource: 'nvidia.com/gpu',
    balance: {
      namespace: 'team-beta',
      team: 'beta',
      resources: {
        'limits.memory': { hard: '64Gi', used: '16Gi', remaining: '48Gi' },
        'requests.nvidia.com/gpu': { hard: '3', used: '1', remaining: '2' },
        'requests.cpu': { hard: '8', used: '500m', remaining: '7500m' }
      },
      observedAt: '2026-01-01T00:00:00Z',
      stale: false
    }
  };

  it('shows used, hard and left per quota key, in the sidebar order and units', () => {
    const markup = renderToStaticMarkup(
      React.createElement(TeamBalances, {
        namespaces: [summary],
        now: Date.now()
      })
    );
    const rows = Array.from(
      markup.matchAll(
        /<tr class="jp-mod-\w+" data-key="([^"]+)" data-hard="([^"]+)"[^>]*>(.*?)<\/tr>/g
      )
    );
    expect(rows.map(r => [r[1], r[2]])).toEqual([
      ['requests.nvidia.com/gpu', '3'],
      ['requests.cpu', '8'],
      ['limits.memory', '64Gi']
    ]);
    const cells = rows.map(r =>
      Array.from(r[3].matchAll(/<td[^>]*>([^<]*)<\/td>/g)).map(m => m[1])
    );
    expect(cells).toEqual([
      ['1 GPU', '3 GPUs', '2 GPUs'],
      ['0.5 CPU', '8 CPUs', '7.5 CPUs'],
      ['16 GiB', '64 GiB', '48 GiB']
    ]);
    expect(markup).toContain('aria-label="Balance of team-beta"');
  });
});
