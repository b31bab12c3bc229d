// The shape of src/remote/: the control plane's side (control/) and the worker's (worker/) never
// import each other, both may use the shared files beside them, and no file grows past 400 lines.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';

const REMOTE = join(ROOT, 'src', 'remote');
const SPECIFIER = /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[^'"`;]*?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Every .ts file under src/remote/, relative to it. */
function files(dir = REMOTE): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [relative(REMOTE, join(dir, e.name))] : [],
  );
}

/** The side a file under src/remote/ belongs to: control, worker, or shared. */
const side = (file: string) => (file.startsWith('control/') ? 'control' : file.startsWith('worker/') ? 'worker' : 'shared');

describe('src/remote/', () => {
  const all = files();

  it('has both sides and the wire between them', () => {
    expect(all).toEqual(expect.arrayContaining(['wire.ts', 'nats.ts', 'control/placement.ts', 'worker/worker.ts']));
  });

  it('keeps control/ and worker/ apart; the shared files import neither', () => {
    const wrong: string[] = [];
    for (const file of all) {
      for (const m of readFileSync(join(REMOTE, file), 'utf8').matchAll(SPECIFIER)) {
        const spec = m[1] ?? m[2] ?? '';
        if (!spec.startsWith('.')) continue;
        const target = relative(REMOTE, resolve(REMOTE, dirname(file), spec));
        if (target.startsWith('..')) continue;
        const from = side(file);
        const to = side(target);
        if (to !== 'shared' && to !== from) wrong.push(`${file} -> ${target}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('has no file over 400 lines', () => {
    const long = all.map((f) => ({ f, lines: readFileSync(join(REMOTE, f), 'utf8').split('\n').length })).filter((x) => x.lines > 400);
    expect(long).toEqual([]);
  });
});
