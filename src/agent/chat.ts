// One streamed chat-completions call against any OpenAI-compatible server, with Node's fetch.
// Retries 429 and 5xx (and connection failures before a response) with bounded backoff that
// honours Retry-After; 401/403/404 and malformed streams fail at once with a clear message.
// The caller's signal aborts the request in flight, so the server sees the connection close.
import type { Tokens } from '../types.ts';
import { z } from 'zod';
import { preview } from '../child/preview.ts';
import { sseData } from './sse.ts';
import { withProps } from '../shapes.ts';

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'tool';
  readonly content: string | null;
  readonly tool_calls?: readonly ToolCallRequest[];
  readonly tool_call_id?: string;
  readonly name?: string;
}

export interface ToolCallRequest {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

export interface ToolSpec {
  readonly type: 'function';
  readonly function: { readonly name: string; readonly description: string; readonly parameters: unknown };
}

export interface ChatEndpoint {
  readonly base_url: string;
  readonly api_key?: string;
  readonly model: string;
  /** Per request, from sending to the end of the stream. Default 120 s. */
  readonly request_timeout_ms?: number;
  /** Retries after the first try, for 429/5xx/network errors. Default 3. */
  readonly max_retries?: number;
  /** First backoff; doubles each retry, capped at retry_max_ms. Default 500 ms. */
  readonly retry_base_ms?: number;
  readonly retry_max_ms?: number;
}

export interface StreamHooks {
  onText?(delta: string): void;
  onReasoning?(delta: string): void;
  /** The server accepted the request (HTTP 200): the prompt reached the model. */
  onAccepted?(): void;
  /** A request failed in a way worth retrying: called once per retry, before its wait. */
  onRetry?(retry: RetryNotice): void;
}

/** One retry of a model request: which one, after what, and how long it waits. */
export interface RetryNotice {
  /** 1 for the first retry. */
  readonly retry: number;
  readonly max_retries: number;
  readonly delay_ms: number;
  readonly error_kind: ModelErrorKind;
  /** The HTTP status, for an HTTP error. */
  readonly status?: number;
}

export interface ChatResult {
  readonly content: string;
  readonly reasoning: string;
  readonly tool_calls: ToolCallRequest[];
  readonly finish_reason: string | null;
  readonly usage: Tokens;
  /** HTTP requests made, retries included. */
  readonly requests: number;
}

export type ModelErrorKind = 'auth' | 'not_found' | 'http' | 'rate_limited' | 'timeout' | 'network' | 'malformed' | 'aborted';

export class ModelError extends Error {
  override readonly name = 'ModelError';
  readonly kind: ModelErrorKind;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;
  /** Output was already streamed: a retry would repeat it, so the error is final. */
  readonly partial: boolean;

  constructor(kind: ModelErrorKind, message: string, opts: { status?: number; retryAfterMs?: number; partial?: boolean } = {}) {
    super(message);
    this.kind = kind;
    this.status = opts.status;
    this.retryAfterMs = opts.retryAfterMs;
    this.partial = opts.partial ?? false;
  }

  get retryable(): boolean {
    return this.kind === 'rate_limited' || this.kind === 'network' || (this.kind === 'http' && (this.status ?? 0) >= 500) || this.kind === 'timeout';
  }
}

/** Waits `ms` unless `signal` aborts first (resolves either way). */
export type Sleeper = (ms: number) => Promise<void>;

export async function streamChat(
  endpoint: ChatEndpoint,
  body: { messages: readonly ChatMessage[]; tools?: readonly ToolSpec[] },
  hooks: StreamHooks,
  signal: AbortSignal,
  sleep: Sleeper,
): Promise<ChatResult> {
  const maxRetries = endpoint.max_retries ?? 3;
  let requests = 0;
  for (let attempt = 0; ; attempt++) {
    requests += 1;
    try {
      const r = await once(endpoint, body, hooks, signal);
      return withProps(r, { requests });
    } catch (err) {
      const e = toModelError(err, signal);
      if (e.kind === 'aborted' || !e.retryable || attempt >= maxRetries || e.partial) throw e;
      const base = endpoint.retry_base_ms ?? 500;
      const cap = endpoint.retry_max_ms ?? 8000;
      const backoff = Math.min(cap, base * 2 ** attempt);
      // Retry-After wins when the server gives one, within a bound (a minute) we are willing to wait.
      const delay_ms = e.retryAfterMs !== undefined ? Math.min(e.retryAfterMs, 60_000) : backoff;
      hooks.onRetry?.({ retry: attempt + 1, max_retries: maxRetries, delay_ms, error_kind: e.kind, ...(e.status !== undefined ? { status: e.status } : {}) });
      await sleep(delay_ms);
      if (signal.aborted) throw new ModelError('aborted', 'interrupted');
    }
  }
}

/** An error after the stream began: final, never retried. */
const streamError = (kind: ModelErrorKind, message: string, status?: number) => new ModelError(kind, message, { status, partial: true });

async function once(
  endpoint: ChatEndpoint,
  body: { messages: readonly ChatMessage[]; tools?: readonly ToolSpec[] },
  hooks: StreamHooks,
  signal: AbortSignal,
): Promise<Omit<ChatResult, 'requests'>> {
  const timeout = AbortSignal.timeout(endpoint.request_timeout_ms ?? 120_000);
  const both = AbortSignal.any([signal, timeout]);
  const url = `${endpoint.base_url.replace(/\/+$/, '')}/chat/completions`;
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'text/event-stream',
      ...(endpoint.api_key ? { Authorization: `Bearer ${endpoint.api_key}` } : {}),
    },
    body: JSON.stringify({
      model: endpoint.model,
      messages: body.messages,
      ...(body.tools && body.tools.length > 0 ? { tools: body.tools } : {}),
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: both,
  });
  if (!res.ok) throw await httpError(res);
  if (!res.body) throw new ModelError('malformed', 'the model server sent no body');
  hooks.onAccepted?.();

  let content = '';
  let reasoning = '';
  let finish_reason: string | null = null;
  let usage: Tokens = { input: 0, output: 0 };
  let sawDone = false;
  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  try {
    for await (const data of sseData(res.body)) {
      if (data.trim() === '[DONE]') {
        sawDone = true;
        break;
      }
      let json: unknown;
      try {
        json = JSON.parse(data);
      } catch {
        throw streamError('malformed', `malformed stream from the model server: not JSON: ${data.slice(0, 120)}`);
      }
      if (typeof json !== 'object' || json === null || Array.isArray(json))
        throw streamError('malformed', 'malformed stream from the model server: a chunk is not an object');
      const checked = streamChunkSchema.safeParse(json);
      if (!checked.success) {
        const first = checked.error.issues[0];
        throw streamError('malformed', `malformed stream from the model server: ${first?.path.join('.') || 'chunk'}: ${first?.message ?? 'unexpected shape'}`);
      }
      const chunk = checked.data;
      if (chunk.error) throw streamError('http', `the model server reported an error mid-stream: ${describeError(chunk.error)}`);
      if (chunk.usage) usage = { input: chunk.usage.prompt_tokens ?? 0, output: chunk.usage.completion_tokens ?? 0 };
      for (const choice of chunk.choices ?? []) {
        const d = choice.delta ?? {};
        const think = d.reasoning_content ?? d.reasoning;
        if (typeof think === 'string' && think !== '') {
          reasoning += think;
          hooks.onReasoning?.(think);
        }
        if (typeof d.content === 'string' && d.content !== '') {
          content += d.content;
          hooks.onText?.(d.content);
        }
        for (const tc of d.tool_calls ?? []) {
          const index = typeof tc.index === 'number' ? tc.index : calls.size;
          const call = calls.get(index) ?? { id: '', name: '', arguments: '' };
          if (tc.id) call.id = tc.id;
          if (tc.function?.name) call.name += tc.function.name;
          if (tc.function?.arguments) call.arguments += tc.function.arguments;
          calls.set(index, call);
        }
        if (choice.finish_reason) finish_reason = choice.finish_reason;
      }
    }
  } catch (err) {
    if (err instanceof ModelError) throw err;
    const e = toModelError(err, signal);
    if (e.kind === 'aborted') throw e;
    // A stream cut mid-way: its text may already be out, so it is final, with a clear message
    // (the server was reached, so not the "cannot reach" wording of a failed connect).
    const detail = e.kind === 'network' ? e.message.replace(/^cannot reach the model server: /, '') : e.message;
    throw streamError(e.kind === 'network' ? 'malformed' : e.kind, `the model stream was cut: ${detail}`, e.status);
  }
  if (!sawDone && finish_reason === null) {
    throw streamError('malformed', 'the model stream ended early (no finish_reason and no [DONE])');
  }
  const tool_calls: ToolCallRequest[] = [...calls.entries()]
    .sort(([a], [b]) => a - b)
    .map(([i, c]) => ({ id: c.id || `call_${i}`, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  return { content, reasoning, tool_calls, finish_reason, usage };
}

/**
 * One chunk of an OpenAI-compatible stream, checked before it is read: servers differ (vLLM,
 * llama.cpp, Ollama add fields and send nulls), so unknown fields pass, but a field we read must
 * have its type or the stream is malformed.
 */
const streamChunkSchema = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        delta: z
          .looseObject({
            content: z.string().nullish(),
            reasoning_content: z.string().nullish(),
            reasoning: z.string().nullish(),
            tool_calls: z
              .array(
                z.looseObject({
                  index: z.number().int().nonnegative().optional(),
                  id: z.string().nullish(),
                  function: z.looseObject({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .nullish(),
  usage: z.looseObject({ prompt_tokens: z.number().nullish(), completion_tokens: z.number().nullish() }).nullish(),
  error: z.unknown().optional(),
});

function describeError(e: unknown): string {
  if (typeof e === 'object' && e !== null && 'message' in e && typeof e.message === 'string') return e.message;
  return preview(e);
}

async function httpError(res: Response): Promise<ModelError> {
  let detail = '';
  try {
    const text = (await res.text()).slice(0, 2000);
    try {
      const parsed: unknown = JSON.parse(text);
      const error = typeof parsed === 'object' && parsed !== null && 'error' in parsed ? parsed.error : undefined;
      detail = error !== undefined ? describeError(error) : text.slice(0, 200);
    } catch {
      detail = text.slice(0, 200);
    }
  } catch {
    detail = '';
  }
  const what = `the model server answered ${res.status}${res.statusText ? ` ${res.statusText}` : ''}${detail ? `: ${detail}` : ''}`;
  const status = res.status;
  const retryAfterMs = retryAfter(res.headers.get('retry-after'));
  if (status === 401 || status === 403) return new ModelError('auth', `${what} (check --api-key / SUBRUN_API_KEY)`, { status });
  if (status === 404) return new ModelError('not_found', `${what} (check --base-url and --model)`, { status });
  if (status === 429) return new ModelError('rate_limited', what, { status, retryAfterMs });
  return new ModelError('http', what, { status, retryAfterMs });
}

/** Retry-After as seconds or an HTTP date, in ms. */
export function retryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function toModelError(err: unknown, signal: AbortSignal): ModelError {
  if (err instanceof ModelError) return err;
  if (signal.aborted) return new ModelError('aborted', 'interrupted');
  const name = prop(err, 'name');
  if (name === 'TimeoutError') return new ModelError('timeout', 'the model request timed out');
  if (name === 'AbortError') return new ModelError('timeout', 'the model request timed out');
  const cause = prop(err, 'cause');
  const code = prop(cause, 'code');
  const message = prop(cause, 'message') ?? (err instanceof Error ? err.message : String(err));
  // The cause is whatever the fetch layer threw: printed as it comes.
  // eslint-disable-next-line @typescript-eslint/no-base-to-string
  return new ModelError('network', `cannot reach the model server: ${String(message)}${code ? ` (${String(code)})` : ''}`);
}

/** `v?.[key]` for a value of unknown type (a primitive has none of the keys asked for here). */
function prop(v: unknown, key: string): unknown {
  return (typeof v === 'object' && v !== null) || typeof v === 'function' ? Reflect.get(v, key) : undefined;
}
