// The timeline's bounded marks (delegation/kept-marks.ts) against the rule as the first form wrote
// it, a plain array: after an add past the bound, the oldest settled mark leaves, never the one
// just added; with no other settled, the oldest. Any sequence of adds, settles and removals keeps
// the same marks in the same order, and says which one left.
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import { KeptMarks } from '../../src/delegation/kept-marks.ts';

interface Mark {
  readonly id: number;
  settled: boolean;
  n: number;
  gone: boolean;
}

/** The rule, one array and a scan: what the timeline did before. */
class Reference {
  readonly list: Mark[] = [];
  constructor(readonly max: number) {}
  add(m: Mark): Mark | undefined {
    this.list.push(m);
    if (this.list.length <= this.max) return undefined;
    const i = this.list.findIndex((s, k) => k < this.list.length - 1 && s.settled);
    return this.list.splice(i >= 0 ? i : 0, 1)[0];
  }
  remove(m: Mark): void {
    const i = this.list.indexOf(m);
    if (i >= 0) this.list.splice(i, 1);
  }
}

type Op = { readonly kind: 'add'; readonly settled: boolean } | { readonly kind: 'settle' | 'remove'; readonly pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('add' as const), settled: fc.boolean() }),
  fc.record({ kind: fc.constantFrom('settle' as const, 'remove' as const), pick: fc.nat() }),
);

describe('KeptMarks', () => {
  test.prop([fc.integer({ min: 1, max: 12 }), fc.array(opArb, { maxLength: 400 })], { numRuns: 300 })(
    'keeps what the scan kept, in acceptance order, and evicts the same mark',
    (max, ops) => {
      const kept = new KeptMarks<Mark>(max);
      const ref = new Reference(max);
      let next = 0;
      for (const op of ops) {
        if (op.kind === 'add') {
          const id = next++;
          const a: Mark = { id, settled: op.settled, n: 0, gone: false };
          const b: Mark = { id, settled: op.settled, n: 0, gone: false };
          expect(kept.add(a, op.settled)?.id).toBe(ref.add(b)?.id);
        } else {
          // Only a kept, still queued mark settles or is withdrawn (the timeline's own calls).
          const queued = ref.list.filter((m) => !m.settled);
          const target = queued[op.pick % Math.max(1, queued.length)];
          if (target === undefined) continue;
          const mine = kept.values().find((m) => m.id === target.id);
          if (mine === undefined) throw new Error(`mark ${target.id} is kept by the reference only`);
          if (op.kind === 'settle') {
            target.settled = true;
            mine.settled = true;
            kept.settled(mine);
          } else {
            ref.remove(target);
            kept.remove(mine);
          }
        }
        expect(kept.values().map((m) => m.id)).toEqual(ref.list.map((m) => m.id));
        expect(kept.size).toBe(ref.list.length);
      }
    },
  );

  it('lets the oldest go when every kept mark is queued (a busy child), past many compactions', () => {
    const kept = new KeptMarks<Mark>(1000);
    const gone: number[] = [];
    for (let id = 0; id < 5000; id++) {
      const out = kept.add({ id, settled: false, n: 0, gone: false }, false);
      if (out) gone.push(out.id);
    }
    expect(gone).toEqual(Array.from({ length: 4000 }, (_, i) => i));
    expect(kept.values().map((m) => m.id)).toEqual(Array.from({ length: 1000 }, (_, i) => 4000 + i));
  });
});
