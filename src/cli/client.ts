// The shell client: `subrun call METHOD [PARAMS_JSON]` prints a result as JSON (`subrun watch`,
// in watch.ts, prints a session's events). Both speak WebSocket to a running `subrun serve --ws`.
import WebSocket from 'ws';
import { helpText, parseFlags, UsageError, wantsHelp, type FlagSpec } from './flags.ts';
import { withProps } from '../shapes.ts';

export const CLIENT_FLAGS = [
  { flag: 'url', env: 'SUBRUN_URL', kind: 'string', arg: 'URL', help: 'the server (default ws://127.0.0.1:8787/)' },
  { flag: 'token', env: 'SUBRUN_TOKEN', kind: 'string', arg: 'T', help: "the server's token" },
  { flag: 'session', env: 'SUBRUN_SESSION', kind: 'string', arg: 'ID', help: 'attach to this session first (with --key)' },
  { flag: 'key', env: 'SUBRUN_SESSION_KEY', kind: 'string', arg: 'KEY', help: 'the session_key from session.create' },
] as const satisfies readonly FlagSpec[];

export const CALL_FLAGS = [
  ...CLIENT_FLAGS,
  { flag: 'timeout-ms', kind: 'int', min: 1, help: 'how long call waits for its reply (default 30000)' },
] as const satisfies readonly FlagSpec[];

const CALL_USAGE = `usage: subrun call METHOD [PARAMS_JSON] [options]

One JSON-RPC call to a running \`subrun serve --ws\`; prints the result as JSON (exit 0), or the
error on stderr (exit 1). With --session, params without session_id get it.`;

/** A JSON object: a reply, an event or the params of a call (the server's to check). */
export type Json = Record<string, unknown>;

export const isJson = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Waiter {
  readonly resolve: (reply: Json) => void;
  readonly reject: (err: Error) => void;
}

export class RpcClient {
  readonly #ws: WebSocket;
  #next = 0;
  /** Calls sent and not answered; each is rejected once if the socket closes first. */
  readonly #pending = new Map<number, Waiter>();
  onevent?: (params: unknown) => void;

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.once('close', () => {
      for (const w of this.#pending.values()) w.reject(new Error('connection closed before the reply'));
      this.#pending.clear();
    });
    ws.on('message', (data) => {
      let msg: unknown;
      try {
        msg = JSON.parse(String(data));
      } catch {
        return;
      }
      if (!isJson(msg)) return;
      if (msg.method === 'event') return this.onevent?.(msg.params);
      const id = msg.id;
      if (typeof id !== 'number') return;
      const waiter = this.#pending.get(id);
      if (waiter) {
        this.#pending.delete(id);
        waiter.resolve(msg);
      }
    });
  }

  static open(url: string, token: string | undefined): Promise<RpcClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers: token ? { Authorization: `Bearer ${token}` } : {}, perMessageDeflate: false });
      ws.once('open', () => resolve(new RpcClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        const fix =
          res.statusCode === 401
            ? token === undefined
              ? ': no token given; pass --token T or set SUBRUN_TOKEN (serve --ws prints its token at start)'
              : ': the token is wrong; pass the one serve --ws was given or printed (--token T or SUBRUN_TOKEN)'
            : '';
        reject(new RefusedError(`server refused the connection: HTTP ${res.statusCode}${fix}`));
      });
      ws.once('error', (err) => reject(new Error(`cannot connect to ${url}: ${err.message}`)));
    });
  }

  /** Registered only once sent: a call that cannot be written or sent rejects, and leaves nothing behind. */
  call(method: string, params: unknown): Promise<Json> {
    const id = ++this.#next;
    if (this.#ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error('connection closed before the reply'));
    let text: string;
    try {
      text = JSON.stringify({ jsonrpc: '2.0', id, method, params });
    } catch {
      return Promise.reject(new Error('PARAMS_JSON cannot be sent: nested too deep'));
    }
    this.#ws.send(text);
    return new Promise((resolve, reject) => this.#pending.set(id, { resolve, reject }));
  }

  get closed(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#ws.readyState === WebSocket.CLOSED) resolve();
      else this.#ws.once('close', () => resolve());
    });
  }

  close(): void {
    this.#ws.close();
  }
}

/** `error CODE: MESSAGE [DATA]`, from a reply's error as the server sent it. */
export function formatError(error: unknown): string {
  const e: Json = isJson(error) ? error : {};
  const text = `error ${String(e.code)}: ${String(e.message)}${e.data === undefined ? '' : ` ${JSON.stringify(e.data)}`}`;
  const fix = HINTS[String(e.code)];
  return fix === undefined ? text : `${text}\n  ${fix}`;
}

/** What a person does about the errors a shell user meets first. */
const HINTS: Record<string, string> = {
  '4001':
    'this call needs a session this connection may use: run `subrun call session.create`, then pass --session ID --key KEY (or SUBRUN_SESSION and SUBRUN_SESSION_KEY)',
};

export interface ClientValues {
  readonly url?: string;
  readonly token?: string;
  readonly session?: string;
  readonly key?: string;
}

/** Opens the connection and attaches to --session (with --key) when given. */
export async function connect(v: ClientValues, onevent?: (params: unknown) => void) {
  const url = v.url ?? 'ws://127.0.0.1:8787/';
  // Checked before connecting: a usage error must not leave an open socket holding the process.
  if (v.session !== undefined && v.key === undefined) throw new UsageError('--session needs --key (the session_key from session.create)');
  const client = await RpcClient.open(url, v.token);
  // Set before attaching: events can arrive in the same read as the attach reply, and are
  // dispatched before the code after `await call(...)` runs.
  client.onevent = onevent;
  const session = v.session;
  if (session !== undefined) {
    const r = await client.call('session.attach', { session_id: session, session_key: v.key });
    if (r.error) {
      client.close();
      throw new AttachError(`attach failed: ${formatError(r.error)}`);
    }
  }
  return { client, session };
}

/** The server refused the upgrade (a wrong token): retrying cannot help. */
export class RefusedError extends Error {
  override readonly name = 'RefusedError';
}

/** The server answered the attach with an error: retrying the same attach cannot help. */
export class AttachError extends Error {
  override readonly name = 'AttachError';
}

/** `subrun call METHOD [PARAMS_JSON]`: exit 0 with the result on stdout, 1 with the error on stderr. */
export async function call(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(CALL_USAGE, CALL_FLAGS));
    return 0;
  }
  const { values, positionals } = parseFlags(argv, CALL_FLAGS);
  const [method, paramsText, extra] = positionals;
  if (!method) throw new UsageError('call needs a METHOD, e.g. subrun call subagent.list \'{"session_id":"..."}\'');
  if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
  let params: Json = {};
  if (paramsText !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(paramsText);
    } catch {
      throw new UsageError(`PARAMS_JSON is not valid JSON: ${paramsText.slice(0, 80)}`);
    }
    if (!isJson(parsed)) throw new UsageError('PARAMS_JSON must be a JSON object, e.g. \'{"session_id":"..."}\'');
    params = parsed;
  }
  const { client, session } = await connect(values);
  try {
    if (session !== undefined && params.session_id === undefined) {
      params = withProps(params, { session_id: session });
    }
    const timeout = values['timeout-ms'] ?? 30_000;
    const reply = await Promise.race([
      client.call(method, params),
      new Promise<never>((_r, reject) => setTimeout(() => reject(new Error(`no reply within ${timeout} ms`)), timeout).unref()),
    ]);
    if (reply.error) {
      process.stderr.write(`${formatError(reply.error)}\n`);
      return 1;
    }
    process.stdout.write(`${JSON.stringify(reply.result, null, 2)}\n`);
    return 0;
  } finally {
    client.close();
  }
}
