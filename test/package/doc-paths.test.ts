// The docs name files (docs/architecture.md's map, the reliability tables, the README's layout):
// every src/, test/, bench/ or docs/ path they name must exist, so a move cannot leave them lying.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';

const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
// Not inside a JSON string (`\"docs/spec.md\"` is a child's made-up file in an example).
const PATH = /(?<![\w./\\"-])((?:src|test|bench|docs)\/[\w./*-]*[\w/*])/g;

/** Paths a document names, minus globs and placeholders. */
function pathsIn(text: string): string[] {
  return [...new Set([...text.matchAll(PATH)].map((m) => m[1] as string))].filter((p) => !/[*{}<>]/.test(p));
}

describe('paths named in the docs', () => {
  it('finds the paths a text names (the check itself)', () => {
    expect(pathsIn('see `src/rpc/server.ts` and src/child/, not xsrc/a or http://x/src/y')).toEqual(['src/rpc/server.ts', 'src/child/']);
  });

  it.each(DOCS)('%s names only files and folders that exist', (doc) => {
    const missing = pathsIn(readFileSync(join(ROOT, doc), 'utf8')).filter((p) => !existsSync(join(ROOT, p)));
    expect(missing).toEqual([]);
  });
});
