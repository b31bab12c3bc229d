// One SERVER span per request: a JSON-RPC call by its method, an HTTP request by its route's
// template (never its path: ids in a span name would make every request a new name). Parented on
// the caller's W3C context, else a new trace. ERROR only for the server's own failures (-32603,
// -32000): a refusal (a 409, a 4001) is an answer, not an error.
import { SpanKind, SpanStatusCode, trace, type Attributes, type Context } from '@opentelemetry/api';
import { extract, tracer, tracing, type Carrier } from './context.ts';

const SERVER_FAULTS = new Set([-32603, -32000]);

export interface RequestTrace {
  /** The request span's context: what the handler starts hangs under it (context.ts's within()). */
  readonly ctx: Context;
  /** Ends the span; `error_code` is the JSON-RPC error the answer carried, if any; `status` HTTP's. */
  end(error_code?: number, status?: number): void;
}

const ended = (): void => undefined;

/**
 * No provider registered: the API would make a no-op span that only passes the caller's context
 * on, so the caller's context passes on as it is, and no attributes are built (bench: http.steer).
 */
const passOn = (parent: Context): RequestTrace => ({ ctx: parent, end: ended });

function start(name: string, attributes: Attributes, parent: Context): RequestTrace {
  const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  let ended = false;
  return {
    ctx: trace.setSpan(parent, span),
    end(error_code, status) {
      if (ended) return;
      ended = true;
      if (status !== undefined) span.setAttribute('http.response.status_code', status);
      if (error_code !== undefined) {
        span.setAttribute('rpc.jsonrpc.error_code', error_code);
        if (SERVER_FAULTS.has(error_code)) span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}

/** A JSON-RPC request (ws, stdio): `method` is a known method's name, or `_OTHER`. */
export function rpcRequest(method: string, transport: string, session_id: unknown, parent: Context): RequestTrace {
  if (!tracing()) return passOn(parent);
  const attributes: Attributes = { 'rpc.system': 'jsonrpc', 'rpc.method': method, 'subrun.transport': transport };
  if (typeof session_id === 'string') attributes['gen_ai.conversation.id'] = session_id;
  return start(method, attributes, parent);
}

/**
 * An HTTP request to a `/v1/` resource: `route` is its template (`/v1/sessions/{sid}/subagents/{cid}/steer`),
 * its parent the W3C context its headers carry. With no provider, none: no context is read and the
 * handler runs as it is, since nothing would record a span under it (bench: http.steer.p50@1conn).
 */
export function httpRequest(method: string, route: string, session_id: string | undefined, headers: Carrier): RequestTrace | undefined {
  if (!tracing()) return undefined;
  const parent = extract(headers);
  const attributes: Attributes = { 'subrun.transport': 'http', 'http.request.method': method, 'http.route': route };
  if (session_id !== undefined) attributes['gen_ai.conversation.id'] = session_id;
  return start(`${method} ${route}`, attributes, parent);
}
