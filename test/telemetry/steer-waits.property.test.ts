// SteerWaits (the metrics' queued steers) against a plain model: a map from
// steer id to its child and queued time. Whatever the order steers settle in (at the head, out of
// order, withdrawn from the tail, twice, unknown, after their child ended), each settle answers
// what the model answers, a child's end hands back exactly its queued steers that its entry names
// missed (in acceptance order), and the size is the model's, across the compaction of a long queue.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SteerWaits } from '../../src/telemetry/steer-waits.ts';

type Cmd =
  | { readonly op: 'queue'; readonly child: number; readonly n: number }
  | { readonly op: 'settle'; readonly pick: number; readonly newest: boolean; readonly fresh: boolean }
  | { readonly op: 'deliverHead'; readonly child: number; readonly n: number }
  | { readonly op: 'ended'; readonly child: number; readonly missed: readonly number[] };

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({ op: fc.constant('queue' as const), child: fc.nat(2), n: fc.integer({ min: 1, max: 700 }) }),
  fc.record({ op: fc.constant('settle' as const), pick: fc.nat(), newest: fc.boolean(), fresh: fc.boolean() }),
  fc.record({ op: fc.constant('deliverHead' as const), child: fc.nat(2), n: fc.integer({ min: 1, max: 1500 }) }),
  fc.record({ op: fc.constant('ended' as const), child: fc.nat(2), missed: fc.array(fc.nat(), { maxLength: 50 }) }),
);

describe('SteerWaits', () => {
  it('answers every settle as a map of queued steers would, in any order', () => {
    fc.assert(
      fc.property(fc.array(cmd, { maxLength: 40 }), (cmds) => {
        const waits = new SteerWaits();
        const model = new Map<string, { child: string; at: number }>();
        /** Every id ever queued, settled or not, in order: what a settle may name. */
        const named: string[] = [];
        let next = 0;
        for (const c of cmds) {
          if (c.op === 'queue') {
            for (let i = 0; i < c.n; i++) {
              const id = `st_${next++}`;
              const child = `sa_${c.child}`;
              waits.queued(child, id, next * 10);
              model.set(id, { child, at: next * 10 });
              named.push(id);
            }
          } else if (c.op === 'settle') {
            const id = c.fresh || named.length === 0 ? `st_unknown_${c.pick}` : (named[c.pick % named.length] as string);
            const want = model.get(id);
            const child = want?.child ?? `sa_${c.pick % 3}`;
            expect(waits.settle(child, id, c.newest)).toBe(want?.at);
            model.delete(id);
          } else if (c.op === 'deliverHead') {
            // Delivery in acceptance order: the oldest queued steers of one child.
            const child = `sa_${c.child}`;
            const oldest = [...model].filter(([, v]) => v.child === child).slice(0, c.n);
            for (const [id, v] of oldest) {
              expect(waits.settle(child, id)).toBe(v.at);
              model.delete(id);
            }
          } else {
            // Its entry's missed detail: some of the child's queued steers, maybe others' or unknown ids.
            const child = `sa_${c.child}`;
            const missed = c.missed.map((k) => ({ steer_id: named.length > 0 && k % 5 !== 0 ? (named[k % named.length] as string) : `st_unknown_${k}` }));
            const missedIds = new Set(missed.map((m) => m.steer_id));
            const want = [...model].filter(([id, v]) => v.child === child && missedIds.has(id)).map(([, v]) => v.at);
            expect(waits.ended(child, missed)).toEqual(want);
            for (const [id, v] of model) if (v.child === child) model.delete(id);
          }
          expect(waits.size).toBe(model.size);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('a settled steer settles no second time, and its child queues again after emptying', () => {
    const waits = new SteerWaits();
    waits.queued('sa_a', 'st_1', 5);
    expect(waits.settle('sa_a', 'st_1')).toBe(5);
    expect(waits.settle('sa_a', 'st_1')).toBeUndefined();
    expect(waits.settle('sa_a', '')).toBeUndefined();
    waits.queued('sa_a', 'st_2', 7);
    expect(waits.size).toBe(1);
    expect(waits.settle('sa_b', 'st_2')).toBeUndefined();
    expect(waits.settle('sa_a', 'st_2', true)).toBe(7);
    expect(waits.size).toBe(0);
  });
});
