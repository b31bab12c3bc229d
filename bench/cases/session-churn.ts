// Case 9, session churn: 10,000 sessions are created, each runs two children that write 16 KiB of
// output, and each is closed: half after their children finished, half while both are still
// running (the close interrupts them, and they finish after it). A closed session must leave
// nothing behind, so the heap (V8 heap + external, after full GCs, with no session open and no
// child live) after all 10,000 must be within 1.2x of the heap after the first 1,000. The bytes
// each later session added are reported beside it.
//
// In process, through the real RpcServer and the in-memory transport (the code path above the
// transport is the wire's): what is measured is the server's own heap, without a client's or a
// socket's. A lean client: replies matched by id, events looked at and dropped.
import { RpcServer } from '../../src/rpc/server.ts';
import { memoryPair } from '../../src/rpc/transports/memory.ts';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { measureMemory } from '../lib/memory.ts';
import { until } from '../lib/micro.ts';
import { row, type Row } from '../lib/stats.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const OUTPUT = 'x'.repeat(16 * KiB);
/** Sessions in flight at once. */
const LANES = 8;
/** The bound on heap after all sessions / heap after the first checkpoint (see docs/benchmarks.md). */
const GOAL = 1.2;

interface Message {
  readonly id?: number;
  readonly result?: Record<string, unknown>;
  readonly error?: { code: number; message: string };
  readonly method?: string;
  readonly params?: { type: string; session_id: string | null };
}

interface Waiter {
  readonly type: string;
  left: number;
  readonly resolve: () => void;
}

class LeanClient {
  readonly #send: (text: string) => void;
  readonly #pending = new Map<number, (m: Message) => void>();
  /** One waiter per session at most: a count of events of one type. */
  readonly #waiting = new Map<string, Waiter>();
  #next = 0;
  errors = 0;

  constructor(server: RpcServer) {
    const pair = memoryPair();
    this.#send = (text) => pair.client.send(text);
    pair.client.onmessage = (text) => this.#receive(JSON.parse(text) as Message);
    server.connect(pair.server);
  }

  #receive(m: Message): void {
    if (m.id !== undefined) {
      const p = this.#pending.get(m.id);
      this.#pending.delete(m.id);
      if (m.error) this.errors++;
      p?.(m);
      return;
    }
    const e = m.params;
    if (m.method !== 'event' || !e?.session_id) return;
    const w = this.#waiting.get(e.session_id);
    if (!w || w.type !== e.type || --w.left > 0) return;
    this.#waiting.delete(e.session_id);
    w.resolve();
  }

  async call(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = ++this.#next;
    const reply = await new Promise<Message>((resolve) => {
      this.#pending.set(id, resolve);
      this.#send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
    if (!reply.result) throw new Error(`${method}: ${reply.error?.code} ${reply.error?.message}`);
    return reply.result;
  }

  /** Resolves once `count` events of `type` of the session have arrived; set it before the call that causes them. */
  expect(session_id: string, type: string, count: number): Promise<void> {
    return new Promise((resolve) => this.#waiting.set(session_id, { type, left: count, resolve }));
  }
}

const FINISH = { kind: 'scripted', steps: [{ op: 'say', text: OUTPUT }, { op: 'finish' }] };
const RUNNING = { kind: 'scripted', steps: [{ op: 'say', text: OUTPUT }, { op: 'wait_steer' }, { op: 'finish' }] };

/** One session: create, two children with 16 KiB of output each, close (after they finish, or while they run). */
async function oneSession(client: LeanClient, i: number): Promise<void> {
  const { session_id } = (await client.call('session.create', { title: `churn ${i}` })) as { session_id: string };
  const whileRunning = i % 2 === 1;
  const agent = whileRunning ? RUNNING : FINISH;
  // Both children wrote their 16 KiB (subagent.text), or the delegation is complete.
  const ready = whileRunning ? client.expect(session_id, 'subagent.text', 2) : client.expect(session_id, 'delegation.complete', 1);
  await client.call('delegation.spawn', {
    session_id,
    tasks: [
      { goal: 'a', agent },
      { goal: 'b', agent },
    ],
  });
  await ready;
  await client.call('session.close', { session_id });
}

async function churn(server: RpcServer, clients: LeanClient[], from: number, to: number): Promise<void> {
  let next = from;
  await Promise.all(
    clients.map(async (client) => {
      while (next < to) await oneSession(client, next++);
    }),
  );
  // Children closed while running finish after their session's close: wait for the last.
  await until(() => server.runtime.liveCount === 0, 60_000, 'every child to finish');
}

export const sessionChurnCase: BenchCase = {
  name: 'session-churn',
  title: 'Session churn: heap after 10,000 sessions with children, created and closed, against after the first 1,000',
  async run(opts: CaseOptions): Promise<Row[]> {
    const total = bySize(opts.mode, { full: 10_000, quick: 3_000, tiny: 40 });
    const first = bySize(opts.mode, { full: 1_000, quick: 1_000, tiny: 10 });
    const server = new RpcServer();
    const clients = Array.from({ length: LANES }, () => new LeanClient(server));
    const before = await measureMemory();
    const t0 = performance.now();
    await churn(server, clients, 0, first);
    const atFirst = await measureMemory();
    const t1 = performance.now();
    await churn(server, clients, first, total);
    const atAll = await measureMemory();
    const t2 = performance.now();
    const errors = clients.reduce((s, c) => s + c.errors, 0);
    const left = {
      sessions: server.sessions.size,
      live: server.runtime.liveCount,
      queues: server.runtime.queueCount,
      retained: server.runtime.list({ include_finished: true }).length,
    };
    opts.log(
      `session-churn: heap ${(before / MiB).toFixed(1)} MiB before, ${(atFirst / MiB).toFixed(1)} after ${first} sessions (${((t1 - t0) / 1000).toFixed(1)} s), ` +
        `${(atAll / MiB).toFixed(1)} after ${total} (${((t2 - t1) / 1000).toFixed(1)} s more); left: ${JSON.stringify(left)}, error replies ${errors}`,
    );
    await server.shutdown();
    const clean = left.sessions === 0 && left.live === 0 && left.retained === 0 && errors === 0;
    const k = (n: number) => (n >= 1000 ? `${n / 1000}k` : `${n}`);
    return [
      row({
        case: `session.churn.heap@${k(total)}`,
        figure: atAll / MiB,
        unit: 'MiB',
        baseline: atFirst / MiB,
        baseline_unit: `MiB after the first ${k(first)}`,
        goal: `<= ${GOAL}`,
        note: `${total} sessions x 2 children x 16 KiB of output, ${LANES} at a time; half closed after their children finished, half while they ran`,
      }),
      row({
        case: 'session.churn.added_per_session',
        figure: (atAll - atFirst) / (total - first),
        unit: 'B/session',
        note: `heap added per session after the first ${k(first)}; the first ${k(first)} added ${((atFirst - before) / first).toFixed(0)} B each (warm-up: code, caches, pools)`,
      }),
      row({
        case: 'session.churn.left_behind',
        figure: left.sessions + left.live + left.retained,
        unit: 'sessions + children',
        goal: 'nothing left, no error reply',
        pass: clean,
        note: `open sessions ${left.sessions}, live children ${left.live}, retained children ${left.retained}, parent queues ${left.queues}, error replies ${errors}`,
      }),
    ];
  },
};
