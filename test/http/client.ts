// HTTP test clients against a real `subrun serve --ws` process on 127.0.0.1: JSON requests with
// node's fetch, and an SSE reader over node:http that parses the stream into frames as they come
// (event-driven waits through Inbox, no sleeps).
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { Inbox, startWsServer, WAIT_MS, type WsServer } from '../helpers/process.ts';
import { splitOn } from '../helpers/split.ts';

export interface HttpServer extends WsServer {
  readonly base: string;
}

export async function startHttp(args: readonly string[] = [], opts: { token?: string | null; env?: Record<string, string> } = {}): Promise<HttpServer> {
  const s = await startWsServer(args, opts);
  return { ...s, base: `http://127.0.0.1:${s.port}` };
}

/** A parsed JSON body, read field by field by the tests (and checked there). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a body is whatever the server sent
export type Json = any;

export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The body parsed as JSON (undefined if it is not JSON). */
  readonly json: Json;
}

export interface ReqOptions {
  readonly token?: string | null;
  readonly key?: string;
  readonly body?: unknown;
  readonly raw?: string;
  readonly headers?: Record<string, string>;
}

export async function req(server: HttpServer, method: string, path: string, o: ReqOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...o.headers };
  const token = o.token === undefined ? server.token : o.token;
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  if (o.key !== undefined) headers['X-Subrun-Session-Key'] = o.key;
  let body: string | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(`${server.base}${path}`, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(WAIT_MS) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export interface Session {
  readonly session_id: string;
  readonly session_key: string;
  readonly generation: number;
}

export async function createSession(server: HttpServer, title?: string): Promise<Session> {
  const r = await req(server, 'POST', '/v1/sessions', { body: title === undefined ? undefined : { title } });
  if (r.status !== 201) throw new Error(`session create: ${r.status} ${r.text}`);
  return r.json as Session;
}

export const scripted = (goal: string, steps: unknown[]) => ({ goal, agent: { kind: 'scripted', steps } });

export async function spawn(
  server: HttpServer,
  s: Session,
  tasks: unknown[],
  headers?: Record<string, string>,
): Promise<{ delegation_id: string; subagent_ids: string[] }> {
  const r = await req(server, 'POST', `/v1/sessions/${s.session_id}/delegations`, { key: s.session_key, body: { tasks }, headers });
  if (r.status !== 202) throw new Error(`spawn: ${r.status} ${r.text}`);
  return r.json;
}

export interface Frame {
  readonly id?: string;
  readonly event?: string;
  readonly data?: string;
  readonly retry?: string;
  /** A comment line (`: ...`), alone in its frame. */
  readonly comment?: string;
}

export interface SseStream {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly frames: Inbox<Frame>;
  /** The raw bytes received so far. */
  readonly raw: () => string;
  /** Stops reading: the response, then its socket, stop taking bytes (the server's writes back up). */
  pause(): void;
  resume(): void;
  close(): void;
}

/** The payload frames only (no retry, no comments). */
export const isEventFrame = (f: Frame) => f.event !== undefined;

/** Opens an event stream; resolves with the status and headers (and frames as they come). */
export function openSse(server: HttpServer, path: string, headers: Record<string, string> = {}): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const r = httpRequest(`${server.base}${path}`, { headers: { Authorization: `Bearer ${server.token}`, Accept: 'text/event-stream', ...headers } }, (res) => {
      const frames = new Inbox<Frame>(`sse ${path}`);
      let all = '';
      res.setEncoding('utf8');
      const feed = splitOn('\n\n', (block) => {
        const f: Record<string, string> = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) f.comment = line.slice(1).trim();
          else {
            const c = line.indexOf(':');
            const name = c < 0 ? line : line.slice(0, c);
            const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
            f[name] = f[name] === undefined ? value : `${f[name]}\n${value}`;
          }
        }
        frames.push(f);
      });
      res.on('data', (chunk: string) => {
        all += chunk;
        feed(chunk);
      });
      res.on('end', () => frames.end());
      res.on('close', () => frames.end());
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        frames,
        raw: () => all,
        pause: () => res.pause(),
        resume: () => res.resume(),
        close: () => r.destroy(),
      });
    });
    r.on('error', (err) => reject(err));
    r.end();
  });
}

/** Takes the next payload frame (skipping retry and comment frames). */
export function nextFrame(stream: SseStream, pred: (f: Frame) => boolean = () => true, what = 'a frame'): Promise<Frame> {
  return stream.frames.take((f) => isEventFrame(f) && pred(f), WAIT_MS, what);
}

/** Takes payload frames until one matches `until` (inclusive). */
export async function framesUntil(stream: SseStream, until: (f: Frame) => boolean): Promise<Frame[]> {
  const out: Frame[] = [];
  for (;;) {
    const f = await nextFrame(stream, () => true, 'the frames until the expected one');
    out.push(f);
    if (until(f)) return out;
  }
}

export const envelope = (f: Frame): { type: string; seq: number; session_id: string; payload: Record<string, Json> } => JSON.parse(f.data ?? 'null');
