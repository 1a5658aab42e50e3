/**
 * `src/api.gen.ts` is what `npm run gen:types` makes of `jupyter_quota/openapi.yaml`
 * today: a change to the spec without regenerating the types fails here.
 */
import { execFileSync } from 'child_process';
import { mkdtempSync, readFileSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';

const root = join(__dirname, '..', '..');

/** The `gen:types` script of package.json, with its output sent to `output`. */
function generate(output: string): string {
  const scripts = JSON.parse(
    readFileSync(join(root, 'package.json'), 'utf8')
  ).scripts;
  const [command, ...args] = (scripts['gen:types'] as string).split(/\s+/);
  const at = args.indexOf('-o');
  args[at + 1] = output;
  execFileSync(join(root, 'node_modules', '.bin', command), args, {
    cwd: root,
    stdio: 'pipe'
  });
  return readFileSync(output, 'utf8');
}

describe('the generated API types', () => {
  it('match jupyter_quota/openapi.yaml (run `npm run gen:types` after changing it)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'api-gen-'));
    try {
      const fresh = generate(join(dir, 'api.gen.ts'));
      expect(readFileSync(join(root, 'src', 'api.gen.ts'), 'utf8')).toBe(fresh);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
