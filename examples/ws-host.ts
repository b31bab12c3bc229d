// A host over WebSocket against a real `subrun serve --ws` process: it spawns two children, steers
// one, interrupts the other and reads their completions from the event stream, each event checked
// and typed by subrun/protocol. Run it after `npm ci`: npx tsx examples/ws-host.ts
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { parseResult, parseWireEvent, type CompletionEntry, type MethodName, type TypedWireEvent } from 'subrun/protocol';

// 1. The server: any free port, a token of our own, no state directory.
const token = randomBytes(12).toString('hex');
const bin = fileURLToPath(new URL('../bin/subrun.js', import.meta.url));
const server = spawn(process.execPath, [bin, 'serve', '--ws', '--port', '0', '--no-state', '--token', token], { stdio: ['ignore', 'ignore', 'pipe'] });
const url = await new Promise<string>((resolve, reject) => {
  let err = '';
  server.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString();
    const m = /subrun listening on (\S+)/.exec(err);
    if (m?.[1]) resolve(m[1]);
  });
  server.once('exit', (code) => reject(new Error(`subrun serve exited ${String(code)}: ${err}`)));
});

// 2. One connection: JSON-RPC calls answered by id, events to the handlers.
const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` } });
await once(ws, 'open');
interface Reply {
  readonly id?: number;
  readonly method?: string;
  readonly params?: unknown;
  readonly result?: unknown;
  readonly error?: { code: number; message: string };
}
let nextId = 0;
const waiting = new Map<number, (reply: Reply) => void>();
const handlers: Array<(e: TypedWireEvent) => void> = [];
ws.on('message', (data: Buffer) => {
  const msg = JSON.parse(data.toString()) as Reply;
  if (msg.method === 'event') for (const fn of handlers) fn(parseWireEvent(msg.params));
  else if (msg.id !== undefined) waiting.get(msg.id)?.(msg);
});
/** One call; its result checked with the protocol's schema for the method. */
async function call<M extends MethodName>(method: M, params: Record<string, unknown> = {}) {
  const id = ++nextId;
  ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
  const reply = await new Promise<Reply>((resolve) => waiting.set(id, resolve));
  if (reply.error) throw new Error(`${method}: ${reply.error.code} ${reply.error.message}`);
  return parseResult(method, reply.result);
}

// 3. A session, two children, a steer and an interrupt; completions as they come (events may
// arrive before the reply of the call that caused them: a steer's delivery before its `queued`).
const { session_id } = await call('session.create', { title: 'example' });
const done = new Promise<CompletionEntry[]>((resolve) => {
  handlers.push((e) => {
    if (e.type === 'subagent.steer.delivered') console.log(`delivered to ${e.payload.goal}: "${e.payload.text}"`);
    if (e.type === 'subagent.complete') console.log(`complete: ${e.payload.goal} ${e.payload.status} ${JSON.stringify(e.payload.summary)}`);
    if (e.type === 'delegation.complete') resolve(e.payload.results);
  });
});
const scripted = (steps: unknown[]) => ({ kind: 'scripted', steps });
const { subagent_ids } = await call('delegation.spawn', {
  session_id,
  tasks: [
    { goal: 'listens', agent: scripted([{ op: 'wait_steer' }, { op: 'finish', summary: 'heard you' }]) },
    { goal: 'hangs', agent: scripted([{ op: 'hang' }]) },
  ],
});
const [listener = '', hanger = ''] = subagent_ids;
console.log('steer:', (await call('subagent.steer', { session_id, subagent_id: listener, text: 'wrap up' })).status);
console.log('interrupt:', (await call('subagent.interrupt', { session_id, subagent_id: hanger })).found);
const results = await done;
console.log('results:', results.map((r) => r.status).join(', '));
const tail = await call('subagent.tail', { session_id, subagent_id: listener });
console.log('tail of listens:', JSON.stringify(tail.text.trim().split('\n').at(-1)));

ws.close();
server.kill('SIGTERM');
await once(server, 'exit');
