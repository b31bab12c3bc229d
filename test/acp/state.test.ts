// What the adapter holds must stay bounded over a long connection: in-process, the real adapter
// (acpStdio, the SDK's agent app, the wire tap) over in-memory pipes, on a real RpcServer. Raw
// lines in, parsed lines out; `held()` is what the adapter keeps.
import { PassThrough } from 'node:stream';
import { realpathSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { acpStdio, type AcpStdio } from '../../src/acp/stdio.ts';
import { RpcLink } from '../../src/rpc/link.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { ROOT } from '../helpers/process.ts';
import { splitLines } from '../helpers/split.ts';
import { deferred, type WireMsg } from './harness.ts';

let server: RpcServer;
let input: PassThrough;
let acp: AcpStdio;
const wire: WireMsg[] = [];
let waiters: Array<{ pred: (m: WireMsg) => boolean; resolve: (m: WireMsg) => void }> = [];

beforeEach(() => {
  // Single-user: another host may take over and close a session the adapter opened.
  server = new RpcServer({ single_user: true });
  input = new PassThrough();
  const output = new PassThrough();
  wire.length = 0;
  waiters = [];
  const lines = splitLines((line) => {
    const m = JSON.parse(line) as WireMsg;
    wire.push(m);
    waiters = waiters.filter((w) => !(w.pred(m) && (w.resolve(m), true)));
  });
  output.on('data', (chunk: Buffer) => lines.push(chunk));
  acp = acpStdio({
    server,
    input,
    output,
    max_message_bytes: server.limits.max_message_bytes,
    roots: [realpathSync(ROOT)],
    logger: silentLogger,
    onInputEnd: async () => undefined,
  });
});

afterEach(async () => {
  await acp.settle(1_000);
  await server.shutdown();
  await acp.finish(1_000);
});

const send = (o: Record<string, unknown>) => void input.write(`${JSON.stringify({ jsonrpc: '2.0', ...o })}\n`);
const answer = (id: number): Promise<WireMsg> => {
  const found = wire.find((m) => m.id === id && !('method' in m));
  if (found) return Promise.resolve(found);
  const d = deferred<WireMsg>();
  waiters.push({ pred: (m) => m.id === id && !('method' in m), resolve: d.resolve });
  return d.promise;
};

async function newSession(id: number): Promise<string> {
  send({ id, method: 'session/new', params: { cwd: ROOT, mcpServers: [] } });
  return (await answer(id)).result.sessionId as string;
}

describe('the adapter state', () => {
  beforeEach(async () => {
    send({ id: 0, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } });
    await answer(0);
  });

  it('a refused prompt leaves no turn behind, however many there are', async () => {
    const sid = await newSession(1);
    const ids = Array.from({ length: 50 }, (_, i) => 100 + i);
    for (const id of ids) send({ id, method: 'session/prompt', params: { sessionId: sid, prompt: [{ type: 'text' }] } });
    for (const id of ids) expect((await answer(id)).error).toMatchObject({ code: -32602 });
    expect(acp.held()).toEqual({ sessions: 1, children: 0, turns: 0, prompts: 0 });
  });

  it("an ACP session's state goes when its subrun session closes; the id is then unknown", async () => {
    const kept = await newSession(1);
    const closed = await newSession(2);
    expect(acp.held().sessions).toBe(2);
    // Another host takes the session over and closes it.
    const other = new RpcLink(server, () => undefined);
    await other.call('session.activate', { session_id: closed });
    await other.call('session.close', { session_id: closed });
    expect(acp.held().sessions).toBe(1);
    send({ id: 3, method: 'session/prompt', params: { sessionId: closed, prompt: [{ type: 'text', text: 'hello' }] } });
    expect((await answer(3)).error).toMatchObject({ code: -32002 });
    // The other session is untouched (no model: its prompt is the server's 4014).
    send({ id: 4, method: 'session/prompt', params: { sessionId: kept, prompt: [{ type: 'text', text: 'hello' }] } });
    expect((await answer(4)).error).toMatchObject({ code: 4014 });
    other.close();
  });
});
