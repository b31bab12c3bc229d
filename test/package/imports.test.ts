// The import graph of src/: no cycles, type-only imports included (two modules that need each
// other's vocabulary share one that belongs in a third), and every arrow between rooms points the
// way docs/architecture.md says (the table ALLOWED below).
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';
import { tsSources } from '../helpers/sources.ts';

const SRC = join(ROOT, 'src');

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

const files = tsSources(SRC).map((f) => relative(SRC, f));
const graph = importGraph(files, (f) => readFileSync(join(SRC, f), 'utf8'));
const ROOMS = [
  'contract',
  'foundation',
  'telemetry',
  'child',
  'registry',
  'delegation',
  'agent',
  'store',
  'server',
  'rpc',
  'http',
  'acp',
  'mcp',
  'remote',
  'remote/control',
  'remote/worker',
  'testing',
  'face',
  'cli',
] as const;
type Room = (typeof ROOMS)[number];
const isRoom = (r: string): r is Room => (ROOMS as readonly string[]).includes(r);

/** The library's faces (package entry points): they may compose anything below the CLI. */
const FACES = new Set(['index.ts', 'server.ts', 'protocol.ts']);

/** A file's room: its folder (remote/ by side), the ground floor, or a face. */
function roomOf(f: string): Room | `unknown room ${string}` {
  if (!f.includes('/')) return FACES.has(f) ? 'face' : 'foundation';
  const parts = f.split('/');
  const top = parts[0] ?? '';
  if (top === 'remote' && (parts[1] === 'control' || parts[1] === 'worker') && parts.length > 2) return `remote/${parts[1]}`;
  return isRoom(top) ? top : `unknown room ${top}`;
}

const BELOW_SURFACES = ['server', 'delegation', 'registry', 'child', 'telemetry', 'foundation', 'contract'] as const;

/**
 * Which rooms each room may import, besides itself: every arrow points down. The ground floor
 * (types, errors, ids, log, clock, version) and the contract below everything; the core (child,
 * registry, delegation, agent) above them; server/ above the core but never the agent (the
 * composition root injects it); the surfaces above server/; the faces and the CLI on top.
 */
const ALLOWED: Readonly<Record<Room, readonly Room[]>> = {
  contract: [],
  foundation: ['contract'],
  // Traces and metrics: told by the runtime and the surfaces, knowing none of them.
  telemetry: ['foundation', 'contract'],
  child: ['foundation', 'contract'],
  registry: ['child', 'foundation', 'contract'],
  delegation: ['registry', 'child', 'telemetry', 'foundation', 'contract'],
  agent: ['delegation', 'registry', 'child', 'telemetry', 'foundation', 'contract'],
  store: ['foundation', 'contract'],
  server: ['store', 'delegation', 'registry', 'child', 'telemetry', 'foundation', 'contract'],
  rpc: [...BELOW_SURFACES],
  http: [...BELOW_SURFACES],
  acp: ['rpc', ...BELOW_SURFACES],
  mcp: ['rpc', ...BELOW_SURFACES],
  remote: ['delegation', 'registry', 'child', 'telemetry', 'foundation', 'contract'],
  // The control plane's JetStream store (remote/control/state/) is the store's working copy.
  'remote/control': ['remote', 'store', 'delegation', 'registry', 'child', 'telemetry', 'foundation', 'contract'],
  'remote/worker': ['remote', 'delegation', 'registry', 'child', 'telemetry', 'foundation', 'contract'],
  testing: ['rpc', 'delegation', 'foundation', 'contract'],
  face: ['agent', 'store', 'server', 'rpc', 'http', 'acp', 'mcp', 'remote', 'remote/control', 'remote/worker', 'testing', ...BELOW_SURFACES],
  cli: ['face', 'agent', 'store', 'server', 'rpc', 'http', 'acp', 'mcp', 'remote', 'remote/control', 'remote/worker', ...BELOW_SURFACES],
};

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

  it('keeps every room to the neighbours the architecture allows (docs/architecture.md)', () => {
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      const from = roomOf(file);
      for (const target of targets) {
        const to = roomOf(target);
        if (!isRoom(from) || !isRoom(to)) continue;
        if (from !== to && !ALLOWED[from].includes(to)) wrong.push(`${file} -> ${target} (${from} may import ${ALLOWED[from].join(', ') || 'nothing'})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('knows every room of src/ (a new room gets its rule here and its line in docs/architecture.md)', () => {
    const unknown = files.filter((f) => !isRoom(roomOf(f)));
    expect(unknown).toEqual([]);
  });

  it('holds a forbidden arrow to be wrong (the check itself)', () => {
    expect(ALLOWED.server).not.toContain('agent');
    expect(ALLOWED.rpc).not.toContain('agent');
    expect(ALLOWED.child).not.toContain('delegation');
    expect(roomOf('remote/control/placement.ts')).toBe('remote/control');
    expect(roomOf('types.ts')).toBe('foundation');
    expect(roomOf('server.ts')).toBe('face');
  });
});
