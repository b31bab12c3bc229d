// The events as unions by type: in-process (`runtime.events`) and on the wire (subrun/protocol's
// TypedWireEvent), narrowed by `e.type`. `tsc --noEmit` checks the types (a field read before its
// type is narrowed is an error); the run checks that parseWireEvent holds frames to the schema.
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createRuntime, scripted, type CompletionEntry, type EventEnvelope } from '../../src/index.ts';
import { isWireEvent, parseWireEvent, type TypedWireEvent } from '../../src/protocol.ts';

describe('events typed by their type', () => {
  it('in-process: after e.type === "subagent.complete", e.entry is the completion entry', async () => {
    const runtime = createRuntime();
    const entries: CompletionEntry[] = [];
    const tools: string[] = [];
    runtime.events.subscribe('subagent.**', (e) => {
      expectTypeOf(e).toEqualTypeOf<EventEnvelope>();
      // Type-checked, never run: before narrowing, entry is unknown on most types.
      // @ts-expect-error -- not narrowed yet
      const unnarrowed = () => e.entry.status;
      void unnarrowed;
      if (e.type === 'subagent.complete') {
        expectTypeOf(e.entry.status).toEqualTypeOf<CompletionEntry['status']>();
        expectTypeOf(e.entry.missed_steer).toEqualTypeOf<string | undefined>();
        entries.push(e.entry);
      }
      if (e.type === 'subagent.tool') tools.push(`${e.subagent_id}:${e.tool_name}`);
    });
    const { subagent_ids, results } = runtime.delegate([{ goal: 'g', runner: scripted([{ op: 'tool', name: 'read' }]) }]);
    await results;
    expect(entries.map((x) => x.status)).toEqual(['completed']);
    expect(tools).toEqual([`${subagent_ids[0]}:read`]);
  });

  it('on the wire: parseWireEvent answers the union, payload typed after narrowing; a bad frame throws', () => {
    const frame = {
      type: 'delegation.dispatched',
      session_id: 'ses_a',
      seq: 3,
      ts: 1796045416.5,
      payload: { delegation_id: 'dg_a', subagent_ids: ['sa_a'], count: 1 },
    };
    const e = parseWireEvent(frame);
    expectTypeOf(e).toEqualTypeOf<TypedWireEvent>();
    // @ts-expect-error -- not narrowed yet: a payload of another type has no count
    const unnarrowed = () => e.payload.count;
    void unnarrowed;
    if (e.type !== 'delegation.dispatched') throw new Error('narrowing');
    expectTypeOf(e.payload.subagent_ids).toEqualTypeOf<string[]>();
    expect(e.payload.count).toBe(1);
    expect(isWireEvent({ ...frame, payload: { ...frame.payload, count: 'one' } })).toBe(false);
    expect(() => parseWireEvent({ ...frame, type: 'subagent.teleport' })).toThrow(/unknown event type subagent\.teleport/);
  });
});
