// The HTTP case's plumbing: a keep-alive POST, an in-process SSE watch (for capturing frames and
// for the idle subscribers, where the client's speed does not matter), the bare server, and
// sessions with children that hold their steers.
import { once } from 'node:events';
import { Agent, request, type IncomingMessage } from 'node:http';
import { startProcess, type ServerProcess } from '../lib/rpc.ts';
import { BENCH_TOKEN } from '../lib/subrun.ts';

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

export function post(port: number, path: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return send('POST', port, path, body, headers);
}

export function get(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return send('GET', port, path, '', headers);
}

/** Closes a session (its children stop, what it held is released): each round starts clean. */
export async function closeSession(port: number, s: Session): Promise<void> {
  const r = await send('DELETE', port, `/v1/sessions/${s.id}`, '', s.keyHeader);
  if (r.status !== 200) throw new Error(`close: ${r.status} ${r.text}`);
}

function send(method: string, port: number, path: string, body: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const r = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        agent,
        headers: { Authorization: `Bearer ${BENCH_TOKEN}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    r.on('error', reject);
    r.end(body);
  });
}

/** An open event stream that counts what it receives and can wait for a condition. */
export interface Watch {
  bytes: number;
  /** `session.idle` frames seen so far. */
  idles: number;
  /** Everything received, when asked to keep it. */
  text: string | undefined;
  waitFor(pred: () => boolean): Promise<void>;
  close(): void;
}

export async function watch(port: number, path: string, keep = false): Promise<Watch> {
  const r = request({ host: '127.0.0.1', port, path, headers: { Authorization: `Bearer ${BENCH_TOKEN}` } });
  r.end();
  const [res] = (await once(r, 'response')) as [IncomingMessage];
  res.setEncoding('utf8');
  const waiters: Array<{ pred: () => boolean; done: () => void }> = [];
  const w: Watch = {
    bytes: 0,
    idles: 0,
    text: keep ? '' : undefined,
    waitFor: (pred) => (pred() ? Promise.resolve() : new Promise((done) => waiters.push({ pred, done }))),
    close: () => r.destroy(),
  };
  let carry = '';
  const MARK = 'event: session.idle\n';
  const count = (t: string) => t.split(MARK).length - 1;
  res.on('data', (c: string) => {
    w.bytes += Buffer.byteLength(c);
    if (w.text !== undefined) w.text += c;
    w.idles += count(carry + c) - count(carry);
    carry = (carry + c).slice(-64);
    for (let i = waiters.length - 1; i >= 0; i--) {
      const x = waiters[i];
      if (x?.pred()) {
        waiters.splice(i, 1);
        x.done();
      }
    }
  });
  return w;
}

export function bare(env: Record<string, string>): Promise<{ proc: ServerProcess; port: number }> {
  return listening(startProcess(['--import', 'tsx', 'bench/servers/http-bare.ts'], env), 'http-bare');
}

/**
 * bench/servers/http-steer-floor.ts: node:http answering each steer with the runtime's own steer
 * and none of subrun's HTTP layer. Compiled, as the runtime it runs is everywhere in the bench.
 */
export function steerFloorServer(): Promise<{ proc: ServerProcess; port: number }> {
  return listening(startProcess(['.bench-build/bench/servers/http-steer-floor.js']), 'http-steer-floor');
}

/** A bench server's port, from the `listening PORT` line it prints first. */
async function listening(proc: ServerProcess, name: string): Promise<{ proc: ServerProcess; port: number }> {
  const stdout = proc.child.stdout;
  if (!stdout) throw new Error('no stdout');
  stdout.setEncoding('utf8');
  const [first] = (await once(stdout, 'data')) as [string];
  const port = Number(/listening (\d+)/.exec(first)?.[1]);
  if (!port) throw new Error(`${name} did not say its port: ${first}${proc.stderr()}`);
  return { proc, port };
}

export interface Session {
  readonly id: string;
  readonly keyHeader: Record<string, string>;
  readonly eventsPath: string;
}

export async function openSession(port: number): Promise<Session> {
  const r = await post(port, '/v1/sessions', '{}');
  if (r.status !== 201 && r.status !== 200) throw new Error(`session: ${r.status} ${r.text}`);
  const s = JSON.parse(r.text) as { session_id: string; session_key: string };
  return {
    id: s.session_id,
    keyHeader: { 'X-Subrun-Session-Key': s.session_key },
    eventsPath: `/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`,
  };
}

/** Spawns `n` children parked in a `hang` step (they hold every steer) and waits until all run. */
export async function spawnHolders(port: number, s: Session, n: number): Promise<string[]> {
  const hold = JSON.stringify({
    tasks: Array.from({ length: n }, (_, i) => ({ goal: `holds its steers ${i}`, agent: { kind: 'scripted', steps: [{ op: 'hang' }] } })),
  });
  const r = await post(port, `/v1/sessions/${s.id}/delegations`, hold, s.keyHeader);
  if (r.status !== 202) throw new Error(`spawn: ${r.status} ${r.text}`);
  const ids = (JSON.parse(r.text) as { subagent_ids: string[] }).subagent_ids;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const l = await get(port, `/v1/sessions/${s.id}/subagents`, s.keyHeader);
    const running = (JSON.parse(l.text) as { subagents: Array<{ status: string }> }).subagents.filter((c) => c.status === 'running').length;
    if (running >= n) return ids;
    if (Date.now() > deadline) throw new Error(`only ${running} of ${n} children running`);
    await new Promise((done) => setTimeout(done, 20));
  }
}

/** The RSS `n` idle subscribers add to `proc`, KiB per subscriber. */
export async function idleKibPerSubscriber(port: number, path: string, proc: ServerProcess, n: number): Promise<number> {
  const before = proc.rss();
  const ws: Watch[] = [];
  for (let i = 0; i < n; i++) ws.push(await watch(port, path));
  await Promise.all(ws.map((w) => w.waitFor(() => w.bytes > 0)));
  await new Promise((r) => setTimeout(r, 200));
  const after = proc.rss();
  for (const w of ws) w.close();
  return (after - before) / n / 1024;
}

export function closeAgent(): void {
  agent.destroy();
}
