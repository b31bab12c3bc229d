// Snapshot-then-live with nothing between, as a property: whatever the point at which a stream
// subscribes (inside the delivery of the k-th event, a microtask or a macrotask after it, or after
// everything) and whatever its cursor (none, one the ring covers, one it lost), the frames it gets
// are: a snapshot (or reset) at seq S whose roster is the state after exactly the events up to S,
// then every event after S; or, for a covered cursor c, every event after c. Compared with what a
// transport attached from the start received: no gap, no duplicate, byte for byte.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { subscribe, type FrameSink } from '../../src/http/sse.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { connectMemory, ok, type WireEvent } from '../helpers/rpc-client.ts';

interface Parsed {
  readonly id: number;
  readonly event: string;
  readonly data: string;
}

function frames(text: string): Parsed[] {
  return text
    .split('\n\n')
    .filter((b) => b.startsWith('id: '))
    .map((b) => {
      const [id, event, data] = b.split('\n').map((l) => l.slice(l.indexOf(': ') + 2));
      return { id: Number(id), event: event as string, data: data as string };
    });
}

let server: RpcServer | undefined;
afterEach(async () => {
  await server?.shutdown();
  server = undefined;
});

type When = 'inside' | 'microtask' | 'macrotask';

describe('SSE subscription against event delivery', () => {
  it('is a snapshot then every later event, or an exact replay, wherever it lands', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 30 }),
        fc.constantFrom<When>('inside', 'microtask', 'macrotask'),
        fc.option(fc.integer({ min: 0, max: 12 }), { nil: undefined }),
        fc.integer({ min: 4, max: 40 }),
        async (says, k, when, back, ring) => {
          server = new RpcServer({ replay_events: ring, max_concurrent_children: 3 });
          const { client } = connectMemory(server);
          const { session_id, session_key } = await ok(client, 'session.create', {});
          let out = '';
          const sink: FrameSink = {
            write: (c) => void (out += c),
            event: (seq, type, text) => void (out += `id: ${seq}\nevent: ${type}\ndata: ${text}\n\n`),
            close: () => undefined,
          };
          let subscribedAt: number | undefined;
          let cursor: number | undefined;
          const session = server.sessions.get(session_id);
          const go = () => {
            if (subscribedAt !== undefined) return;
            subscribedAt = session?.seq ?? 0;
            cursor = back === undefined ? undefined : Math.max(0, subscribedAt - back);
            expect(subscribe(server as RpcServer, session_id, session_key, cursor, sink)).toBeDefined();
          };
          let count = 0;
          server.runtime.onOwnedEvent(() => {
            if (++count !== k) return;
            if (when === 'inside') go();
            else if (when === 'microtask') queueMicrotask(go);
            else setImmediate(go);
          });
          const tasks = says.map((n, i) => ({
            goal: `c${i}`,
            agent: { kind: 'scripted', steps: [...Array.from({ length: n }, (_, j) => ({ op: 'say', text: `${i}.${j}` })), { op: 'finish', summary: 'ok' }] },
          }));
          await ok(client, 'delegation.spawn', { session_id, tasks });
          await client.waitForEvent((e) => e.type === 'session.idle');
          await new Promise((r) => setImmediate(r));
          go();
          const truth: WireEvent[] = client.events.filter((e) => e.session_id === session_id);
          const got = frames(out);
          const S = subscribedAt as number;
          const after = (seq: number) => truth.filter((e) => e.seq > seq);
          const first = got[0] as Parsed;
          const replayable = cursor !== undefined && cursor >= truth.filter((e) => e.seq <= S).length - ring && cursor <= S;
          let live: Parsed[];
          if (cursor !== undefined && replayable) {
            expect(got.map((f) => f.id)).toEqual(after(cursor).map((e) => e.seq));
            live = got;
          } else {
            expect(first.event).toBe(cursor === undefined ? 'snapshot' : 'reset');
            expect(first.id).toBe(S);
            const snap = JSON.parse(first.data) as { seq: number; subagents: Array<{ subagent_id: string; status: string }> };
            expect(snap.seq).toBe(S);
            // The roster is the state after exactly the events up to S.
            const upTo = truth.filter((e) => e.seq <= S);
            const spawned = upTo.filter((e) => e.type === 'subagent.spawn_requested').map((e) => e.payload.subagent_id);
            const done = new Set(upTo.filter((e) => e.type === 'subagent.complete').map((e) => e.payload.subagent_id));
            expect(snap.subagents.map((c) => c.subagent_id).sort()).toEqual([...spawned].sort());
            for (const c of snap.subagents) expect(c.status === 'completed', c.subagent_id).toBe(done.has(c.subagent_id));
            live = got.slice(1);
            expect(live.map((f) => f.id)).toEqual(after(S).map((e) => e.seq));
          }
          for (const f of live) {
            const e = truth.find((t) => t.seq === f.id);
            expect(JSON.parse(f.data)).toEqual(e);
            expect(f.event).toBe(e?.type);
          }
          await server.shutdown();
          server = undefined;
        },
      ),
      { numRuns: 60 },
    );
  });
});
