// A local fake of an OpenAI-compatible chat-completions server: real HTTP and SSE on 127.0.0.1,
// scripted per test. Each request takes the next scripted reply; every request body is recorded
// so tests can assert the exact messages the model received.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Chunk = Record<string, unknown> | string;

export interface ScriptedReply {
  readonly status?: number;
  readonly headers?: Record<string, string>;
  /** A non-stream body (for errors). */
  readonly body?: string;
  /** SSE data payloads (objects are JSON-encoded); `[DONE]` is sent after them unless `noDone`. */
  readonly chunks?: readonly Chunk[];
  readonly noDone?: boolean;
  /** Awaited before the chunk at this index is sent: lets a test act "during" the stream. */
  readonly gates?: Readonly<Record<number, Promise<unknown>>>;
  /** Destroy the socket after this many chunks (a stream cut in the middle). */
  readonly cutAfter?: number;
  /** Never finish: wait until the client goes away. */
  readonly hang?: boolean;
}

export interface RecordedRequest {
  readonly body: {
    model: string;
    messages: Array<{ role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }>;
    tools?: Array<{ function: { name: string } }>;
    stream: boolean;
    stream_options?: { include_usage?: boolean };
  };
  readonly headers: IncomingMessage['headers'];
  /** Resolves when the client closed the connection before the reply ended. */
  readonly aborted: Promise<void>;
}

export class FakeModel {
  readonly requests: RecordedRequest[] = [];
  readonly #replies: Array<ScriptedReply | ((req: RecordedRequest) => ScriptedReply)> = [];
  readonly #server: Server;
  #waiters: Array<{ n: number; resolve: () => void }> = [];
  url = '';

  private constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  static async start(): Promise<FakeModel> {
    const m = new FakeModel();
    await new Promise<void>((resolve) => m.#server.listen(0, '127.0.0.1', resolve));
    m.url = `http://127.0.0.1:${(m.#server.address() as AddressInfo).port}/v1`;
    return m;
  }

  /** Queues replies for the next requests, in order. */
  reply(...replies: Array<ScriptedReply | ((req: RecordedRequest) => ScriptedReply)>): this {
    this.#replies.push(...replies);
    return this;
  }

  /** Resolves once `n` requests have arrived. */
  waitForRequests(n: number): Promise<void> {
    if (this.requests.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ n, resolve }));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    let abortedResolve!: () => void;
    const aborted = new Promise<void>((resolve) => (abortedResolve = resolve));
    res.on('close', () => {
      if (!res.writableFinished) abortedResolve();
    });
    const recorded: RecordedRequest = { body: JSON.parse(raw) as RecordedRequest['body'], headers: req.headers, aborted };
    this.requests.push(recorded);
    this.#waiters = this.#waiters.filter((w) => (this.requests.length >= w.n ? (w.resolve(), false) : true));
    const next = this.#replies.shift();
    const reply = typeof next === 'function' ? next(recorded) : next;
    if (!reply) {
      res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'the fake model has no scripted reply left' } }));
      return;
    }
    if (reply.body !== undefined || (reply.status ?? 200) !== 200) {
      res.writeHead(reply.status ?? 200, { 'Content-Type': 'application/json', ...reply.headers });
      res.end(reply.body ?? '');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', ...reply.headers });
    const chunks = reply.chunks ?? [];
    for (let i = 0; i < chunks.length; i++) {
      const gate = reply.gates?.[i];
      if (gate) await gate;
      if (res.destroyed) return;
      if (reply.cutAfter !== undefined && i >= reply.cutAfter) {
        res.socket?.destroy();
        return;
      }
      const c = chunks[i] as Chunk;
      res.write(`data: ${typeof c === 'string' ? c : JSON.stringify(c)}\n\n`);
    }
    if (reply.cutAfter !== undefined && reply.cutAfter >= chunks.length) {
      res.socket?.destroy();
      return;
    }
    if (reply.hang) {
      await aborted;
      return;
    }
    if (!reply.noDone) res.write('data: [DONE]\n\n');
    res.end();
  }
}

// ---- chunk builders, in the shape OpenAI streams them ----

export const textChunk = (content: string): Chunk => ({ choices: [{ index: 0, delta: { content } }] });
export const reasoningChunk = (reasoning_content: string): Chunk => ({ choices: [{ index: 0, delta: { reasoning_content } }] });
export const finishChunk = (finish_reason = 'stop'): Chunk => ({ choices: [{ index: 0, delta: {}, finish_reason }] });
export const usageChunk = (prompt_tokens: number, completion_tokens: number): Chunk => ({ choices: [], usage: { prompt_tokens, completion_tokens } });
export const toolCallChunk = (index: number, id: string, name: string, args: string): Chunk => ({
  choices: [{ index: 0, delta: { tool_calls: [{ index, id, type: 'function', function: { name, arguments: args } }] } }],
});

/** A complete final answer. */
export function answer(text: string, usage: [number, number] = [10, 5]): ScriptedReply {
  return { chunks: [textChunk(text), finishChunk('stop'), usageChunk(...usage)] };
}

/** A reply that asks for tool calls. */
export function callTools(calls: ReadonlyArray<{ name: string; args: unknown; id?: string }>, usage: [number, number] = [10, 5]): ScriptedReply {
  return {
    chunks: [
      ...calls.map((c, i) => toolCallChunk(i, c.id ?? `call_${i}`, c.name, typeof c.args === 'string' ? c.args : JSON.stringify(c.args))),
      finishChunk('tool_calls'),
      usageChunk(...usage),
    ],
  };
}
