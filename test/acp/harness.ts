// The IDE's side of `subrun serve --acp` for tests: the official SDK's client (/unstable, as an IDE
// with subagent support uses it) in the test process, the server as a real child process over a
// real stdio pipe, and the model behind a local fake OpenAI-compatible streaming server whose
// replies are routed by sender (the parent agent, or the child with that goal). Every line the
// server writes is kept in wire order (`wire`), which is what order assertions read: the client
// SDK dispatches handlers concurrently, the wire does not lie. Every wait is on a wire message or
// an exit, bounded by WAIT_MS.
import { Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk/unstable';
import type { ClientConnection, SessionNotification } from '@agentclientprotocol/sdk/unstable';
import { answer, FakeModel } from '../helpers/fake-model.ts';
import { ModelRouter } from '../helpers/model-router.ts';
import { ROOT, spawnSubrun, WAIT_MS, type Proc } from '../helpers/process.ts';
import { splitLines } from '../helpers/split.ts';

export type WireMsg = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export { deferred, goalOf, systemOf, type Reply } from '../helpers/model-router.ts';

/** The ACP tests' router: a parent with nothing (more) scripted says it is done. */
export class Router extends ModelRouter {
  constructor(model: FakeModel) {
    super(model, answer('all done'));
  }
}

export interface AcpServer {
  readonly proc: Proc;
  readonly conn: ClientConnection;
  /** Every stdout line, parsed, in wire order (a line that is not JSON is kept as {nonJson: line}). */
  readonly wire: WireMsg[];
  /** Every session/update the client SDK handed to its handler. */
  readonly updates: SessionNotification[];
  /** Resolves with the first wire message (from the start) matching `pred`. */
  until(pred: (m: WireMsg) => boolean, what: string): Promise<WireMsg>;
  /** initialize, with or without the `subagents` capability. */
  initialize(subagents: boolean): Promise<Record<string, unknown>>;
  newSession(cwd?: string): Promise<string>;
  prompt(sessionId: string, text: string): Promise<{ stopReason: string }>;
  /** Writes raw bytes to the server's stdin (malformed input). */
  raw(text: string): void;
}

const safe = (pred: (m: WireMsg) => boolean, m: WireMsg) => {
  try {
    return pred(m);
  } catch {
    return false;
  }
};

export function startAcp(modelUrl: string, extra: readonly string[] = [], env: Record<string, string> = {}): AcpServer {
  const proc = spawnSubrun(['serve', '--acp', '--base-url', modelUrl, '--model', 'fake', '--workspace', ROOT, '--max-spawn-depth', '2', ...extra], env);
  const wire: WireMsg[] = [];
  const waiters: Array<{ pred: (m: WireMsg) => boolean; resolve: (m: WireMsg) => void }> = [];
  let feed!: ReadableStreamDefaultController<Uint8Array>;
  const readable = new ReadableStream<Uint8Array>({ start: (c) => void (feed = c) });
  const encoder = new TextEncoder();
  // Split as bytes, then decoded a line at a time: a chunk may end inside a character.
  const lines = splitLines((line) => {
    let m: WireMsg;
    try {
      m = JSON.parse(line) as WireMsg;
      if (typeof m !== 'object' || m === null) m = { nonJson: line };
    } catch {
      m = { nonJson: line };
    }
    wire.push(m);
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i];
      if (w && safe(w.pred, m)) {
        waiters.splice(i, 1);
        w.resolve(m);
      }
    }
    feed.enqueue(encoder.encode(`${line}\n`));
  });
  proc.child.stdout.on('data', (chunk: Buffer) => lines.push(chunk));
  proc.child.stdout.on('end', () => feed.close());
  const updates: SessionNotification[] = [];
  const conn = acp
    .client()
    .onNotification(acp.methods.client.session.update, ({ params }) => void updates.push(params))
    .connect(acp.ndJsonStream(Writable.toWeb(proc.child.stdin), readable));
  const until = (pred: (m: WireMsg) => boolean, what: string) => {
    const found = wire.find((m) => safe(pred, m));
    if (found) return Promise.resolve(found);
    return new Promise<WireMsg>((resolve, reject) => {
      const w = { pred, resolve };
      waiters.push(w);
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(w), 1);
        reject(new Error(`timed out waiting for ${what}; stderr: ${proc.stderr.all.join('\n').slice(0, 800)}`));
      }, WAIT_MS);
      void proc.exited.then(() => clearTimeout(timer));
      const orig = w.resolve;
      w.resolve = (m) => (clearTimeout(timer), orig(m));
    });
  };
  return {
    proc,
    conn,
    wire,
    updates,
    until,
    initialize: (subagents) =>
      conn.agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: subagents ? { subagents: {} } : {},
      }),
    async newSession(cwd = ROOT) {
      const r = await conn.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
      return r.sessionId;
    },
    prompt: (sessionId, text) => conn.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] }),
    raw: (text) => void proc.child.stdin.write(text),
  };
}

// ---- reading the wire ----

export const update = (m: WireMsg): WireMsg | undefined => (m.method === 'session/update' ? (m.params?.update as WireMsg) : undefined);

/** A session/update on session `sid` of kind `kind` (and matching `more`). */
export const isUpdate =
  (sid: string, kind: string, more: (u: WireMsg) => boolean = () => true) =>
  (m: WireMsg) =>
    m.method === 'session/update' && m.params?.sessionId === sid && update(m)?.sessionUpdate === kind && more(update(m) as WireMsg);

/** The announcement of the child with this goal (a subagent_update with a title). */
export const isAnnounce = (goal: string) => (m: WireMsg) => update(m)?.sessionUpdate === 'subagent_update' && update(m)?.title === goal;

/** The tool call standing for the child with this goal (clients without `subagents`). */
export const isChildCall = (goal: string) => (m: WireMsg) =>
  update(m)?.sessionUpdate === 'tool_call' && update(m)?.kind === 'think' && update(m)?.title === goal;

/** Whether a wire message concerns child `id` (on its session, or naming it). */
export const mentions = (id: string) => (m: WireMsg) => m.params?.sessionId === id || update(m)?.sessionId === id || update(m)?.toolCallId === id;

export const isTerminal = (id: string) => (m: WireMsg) =>
  update(m)?.sessionUpdate === 'subagent_update' && update(m)?.sessionId === id && update(m)?.state?.state === 'idle';

export const isCallDone = (id: string) => (m: WireMsg) =>
  update(m)?.sessionUpdate === 'tool_call_update' && update(m)?.toolCallId === id && ['completed', 'failed'].includes(update(m)?.status as string);

export const responseTo = (id: number | string) => (m: WireMsg) => m.id === id && !('method' in m);

export function expectNoStray(s: AcpServer): WireMsg[] {
  return s.wire.filter((m) => 'nonJson' in m || m.jsonrpc !== '2.0');
}

export { FakeModel, ROOT };

// The SDK's own generated zod schemas (the parsers its client runs on what it receives). Not in the
// package's exports, so imported by path: what they strip or refuse, an IDE never sees.
export {
  zCancelNotification,
  zInitializeRequest,
  zInitializeResponse,
  zNewSessionRequest,
  zNewSessionResponse,
  zPromptRequest,
  zPromptResponse,
  zSessionNotification,
} from '../../node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js';
