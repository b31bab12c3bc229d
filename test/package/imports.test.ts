// The import graph of src/: no cycles, type-only imports included (two modules that need each
// other's vocabulary share one that belongs in a third), and the arrows between rooms point the
// way the architecture says (the contract is a leaf; the core imports no surface).
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';

const SRC = join(ROOT, 'src');

/** Every .ts file under `dir`, as paths relative to src/. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [relative(SRC, path)] : [];
  });
}

const SPECIFIER = /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[^'"`;]*?\s+from\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** file -> the src files it imports (relative specifiers only). */
function importGraph(files: readonly string[], read: (file: string) => string): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets: string[] = [];
    for (const m of read(file).matchAll(SPECIFIER)) {
      const spec = m[1] ?? m[2];
      if (!spec?.startsWith('.')) continue;
      const target = relative(SRC, resolve(SRC, dirname(file), spec));
      if (known.has(target)) targets.push(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components of more than one file, or a file importing itself (Tarjan). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const files = sources(SRC);
const graph = importGraph(files, (f) => readFileSync(join(SRC, f), 'utf8'));
const room = (f: string) => (f.includes('/') ? f.slice(0, f.indexOf('/')) : '(root)');

describe('the import graph of src/', () => {
  it('finds a cycle where there is one, type-only imports included (the check itself)', () => {
    const sample = new Map([
      ['a.ts', "import type { B } from './b.ts';"],
      ['b.ts', "import { c } from './c.ts';"],
      ['c.ts', "export type { A } from './a.ts';"],
      ['d.ts', "import { a } from './a.ts';"],
    ]);
    const g = importGraph([...sample.keys()], (f) => sample.get(f) ?? '');
    expect(cycles(g)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('has no import cycles', () => {
    expect(files.length).toBeGreaterThan(40);
    expect(cycles(graph)).toEqual([]);
  });

  it('keeps the rooms layered: the contract is a leaf, the core imports no surface', () => {
    const surfaces = new Set(['rpc', 'http', 'acp', 'remote', 'cli']);
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      for (const target of targets) {
        const from = room(file);
        const to = room(target);
        if (from === 'contract' && to !== 'contract') wrong.push(`${file} -> ${target} (the contract imports only zod)`);
        if (['child', 'registry', 'delegation'].includes(from) && surfaces.has(to)) wrong.push(`${file} -> ${target} (the core imports no surface)`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
