// The tool preview: what a child's transcript and tool events show of a tool's arguments and
// result. Whatever a runner or a model hands it, it never throws and stays within its bounds.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { PREVIEW_CHARS, PREVIEW_DEPTH, preview } from '../../src/child/preview.ts';
import { flush } from '../helpers/manual-clock.ts';
import { runtimeHarness } from '../helpers/runtime-harness.ts';

/** `{"a":{"a":…}}` nested `depth` deep, built without recursion. */
function deepObject(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

function deepArray(depth: number): unknown {
  let v: unknown = [];
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('preview', () => {
  test.prop([fc.jsonValue({ maxDepth: PREVIEW_DEPTH - 1 })])('writes what JSON.stringify writes for plain JSON within the bounds', (v) => {
    const json = JSON.stringify(v);
    const shown = typeof v === 'string' ? v : json;
    const expected = shown.length > PREVIEW_CHARS ? `${shown.slice(0, PREVIEW_CHARS - 1)}…` : shown;
    expect(preview(v)).toBe(expected);
  });

  it('shows arguments nested far past the stack (where JSON.stringify throws) within its bounds', () => {
    for (const deep of [deepObject(5_000), deepArray(5_000), deepObject(200_000)]) {
      if (deep !== undefined && (deep as { a?: unknown }).a !== undefined) expect(() => JSON.stringify(deep)).toThrow(RangeError);
      const s = preview(deep);
      expect(s.length).toBeLessThanOrEqual(PREVIEW_CHARS);
      expect(s.startsWith('{"a":') || s.startsWith('[[')).toBe(true);
    }
    expect(preview(deepObject(12))).toBe(`${'{"a":'.repeat(PREVIEW_DEPTH)}{…}${'}'.repeat(PREVIEW_DEPTH)}`);
  });

  it('never throws: cycles, throwing getters, a hostile Proxy, BigInt, a toJSON that never ends', () => {
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    expect(preview(cyclic).startsWith('{"name":"loop","self":{"name":"loop"')).toBe(true);
    const getter = Object.defineProperty({}, 'boom', {
      enumerable: true,
      get() {
        throw new Error('no');
      },
    });
    expect(preview(getter)).toBe('[unprintable]');
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('no');
        },
      },
    );
    expect(preview(proxy)).toBe('[unprintable]');
    expect(preview({ n: 10n })).toBe('{"n":10n}');
    const endless = { toJSON: (): unknown => ({ toJSON: endless.toJSON }) };
    expect(preview(endless)).toBe('{…}');
    expect(preview(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"');
  });

  it('cuts a huge string or a wide object at the bound without serialising all of it', () => {
    const huge = 'x'.repeat(50_000_000);
    expect(preview(huge)).toBe(`${'x'.repeat(PREVIEW_CHARS - 1)}…`);
    expect(preview({ huge }).length).toBe(PREVIEW_CHARS);
    const wide = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, i]));
    const s = preview(wide);
    expect(s.length).toBe(PREVIEW_CHARS);
    expect(s.startsWith('{"k0":0,"k1":1,')).toBe(true);
  });
});

describe('children whose tool arguments are nested 5,000 deep', () => {
  it('complete, with a bounded preview in their tool events and transcripts', async () => {
    const { rt, events } = runtimeHarness();
    const deep = [deepArray(5_000), deepObject(5_000)];
    const h = rt.delegate(
      deep.map((args, i) => ({
        goal: `deep args ${i}`,
        agent: {
          kind: 'scripted',
          steps: [
            { op: 'tool', name: 'deep', args, result: 'fine' },
            { op: 'finish', summary: 'ok' },
          ],
        },
      })),
    );
    await flush();
    const entries = await h.results;
    expect(entries.map((e) => [e.status, e.summary])).toEqual([
      ['completed', 'ok'],
      ['completed', 'ok'],
    ]);
    const previews = h.subagent_ids.map((id) => String(events.find((e) => e.type === 'subagent.tool' && e.subagent_id === id)?.preview));
    expect(previews[0]).toMatch(/^\[\[\[/);
    expect(previews[1]).toMatch(/^\{"a":\{"a":/);
    for (const p of previews) expect(p.length).toBeLessThanOrEqual(PREVIEW_CHARS);
    expect(rt.tail(h.subagent_ids[1]!).text).toContain('[tool] deep {"a":{"a":');
  });
});
