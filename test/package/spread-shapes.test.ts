// Object literals that begin with a spread and then add a key (`{ ...base, key: value }`): Node 20's
// V8 gives each object such a literal makes, once its function is optimized, a map of its own, so
// every read of it misses the inline caches (src/shapes.ts). src/ builds them with withProps, or
// with its own key first. Literals outside any function (a module's constants, zod schemas) run
// once and are let be. The V8 behaviour itself, and withProps' answer to it, are checked in a
// node with its natives on, over the built package.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';
import { tsSources } from '../helpers/sources.ts';

const SRC = join(ROOT, 'src');

/** `file:line: text` of each literal inside a function that begins with a spread and adds a key after it. */
function spreadThenKey(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node, inFunction: boolean): void => {
    const inside = inFunction || ts.isFunctionLike(node);
    if (inside && ts.isObjectLiteralExpression(node)) {
      const [first, ...rest] = node.properties;
      if (first !== undefined && ts.isSpreadAssignment(first) && rest.some((p) => !ts.isSpreadAssignment(p))) {
        const line = source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
        found.push(`${file}:${line}: ${node.getText().replace(/\s+/g, ' ').slice(0, 80)}`);
      }
    }
    ts.forEachChild(node, (child) => visit(child, inside));
  };
  visit(source, false);
  return found;
}

/** Runs `script` (an ES module) in a node with V8's natives syntax on; its stdout. */
function withNatives(script: string): string {
  return execFileSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
}

describe('object literals that begin with a spread', () => {
  it('finds one inside a function, and none at module level or with a key first (the check itself)', () => {
    const sample = [
      'const top = { ...a, b: 1 };',
      'function f(p) { return { ...p, session_id: 1 }; }',
      'const g = (p) => ({ type: 1, ...p, c: 2 });',
      'const h = (p) => ({ ...p, ...q });',
    ].join('\n');
    expect(spreadThenKey('sample.ts', sample)).toEqual(['sample.ts:2: { ...p, session_id: 1 }']);
  });

  it('src/ makes none inside a function', () => {
    const found = tsSources(SRC).flatMap((f) => spreadThenKey(relative(ROOT, f), readFileSync(f, 'utf8')));
    expect(found).toEqual([]);
  });

  it('V8 gives each object the spread form makes a map of its own once optimized; withProps keeps one', () => {
    const script = `
      import { withProps } from './dist/shapes.js';
      const spread = (p, id) => ({ ...p, session_id: id });
      const assigned = (p, id) => withProps(p, { session_id: id });
      const out = {};
      for (const [name, f] of Object.entries({ spread, assigned })) {
        for (let i = 0; i < 200000; i++) f({ subagent_id: 'sa_' + (i & 7), text: 't' }, 'se');
        const a = f({ subagent_id: 'a', text: 'b' }, 's');
        const b = f({ subagent_id: 'c', text: 'd' }, 't');
        out[name] = %HaveSameMap(a, b);
      }
      process.stdout.write(JSON.stringify(out));`;
    expect(JSON.parse(withNatives(script))).toEqual({ spread: false, assigned: true });
  });

  it('withProps: extra wins, base is not changed, a JSON __proto__ key stays an own key, and no base is none', () => {
    const script = `
      import { withProps } from './dist/shapes.js';
      const base = { a: 1, b: 2 };
      const merged = withProps(base, { b: 3, c: 4 });
      const hostile = withProps(JSON.parse('{"__proto__": {"polluted": true}, "x": 1}'), { y: 2 });
      // A plain-JS caller's null, as a spread of it: nothing.
      const fromNull = withProps(null, { z: 1 });
      const fromUndefined = withProps(undefined, { z: 2 });
      process.stdout.write(JSON.stringify({
        merged, base,
        protoOwn: Object.hasOwn(hostile, '__proto__'),
        polluted: hostile.polluted === true,
        plainProto: Object.getPrototypeOf(hostile) === Object.prototype,
        keys: Object.keys(hostile),
        fromNull,
        fromUndefined,
      }));`;
    expect(JSON.parse(withNatives(script))).toEqual({
      merged: { a: 1, b: 3, c: 4 },
      base: { a: 1, b: 2 },
      protoOwn: true,
      polluted: false,
      plainProto: true,
      keys: ['__proto__', 'x', 'y'],
      fromNull: { z: 1 },
      fromUndefined: { z: 2 },
    });
  });
});
