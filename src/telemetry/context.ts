// Trace context in and out, with no context manager needed: a request's span context is held
// here while its handler runs synchronously (the runtime's delegate, steer and interrupt calls
// happen in that step), so the tree holds whether or not the application registered an
// AsyncLocalStorage context manager. Everything later (p-queue, timers, NATS) is parented
// explicitly from the spans telemetry keeps per child.
import {
  context,
  isSpanContextValid,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';
import { VERSION } from '../version.ts';

/** The library's tracer: a no-op until an application registers a provider (the API's proxy). */
export const tracer = trace.getTracer('subrun', VERSION);

let current: Context | undefined;

/** The API's no-op provider (one instance): what the global proxy delegates to until an SDK is registered. */
// eslint-disable-next-line @typescript-eslint/no-deprecated -- the 1.x API's one way to see whether a provider is registered; 1.9.x is pinned (the Node-20 SDK line)
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * Whether an application registered a tracer provider. Until one does, every span would be a
 * no-op that only passes its parent on: the runtime then makes none and keeps nothing per child
 * (bench/cases/otel.ts measured that path at 2.4 µs a child otherwise). Checked at each hook, so
 * a provider registered later is used from its first child on.
 */
export function tracing(): boolean {
  const p = trace.getTracerProvider();
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- as above
  return !(p instanceof ProxyTracerProvider) || p.getDelegate() !== NOOP_PROVIDER;
}

/** Runs `fn` with `ctx` as the parent of what it starts synchronously (a delegation, a steer's attributes). */
export function within<T>(ctx: Context, fn: () => T): T {
  const prev = current;
  current = ctx;
  try {
    return fn();
  } finally {
    current = prev;
  }
}

/** The parent for a span started now: the request being handled, else the active context. */
export function ambient(): Context {
  return current ?? context.active();
}

/** The context `within()` holds now, if any (a remote child's spawn: the span its worker named). */
export function held(): Context | undefined {
  return current;
}

/** The span of the request being handled, if any (to add a steer's or an interrupt's attributes). */
export function requestSpan(): Span | undefined {
  return current === undefined ? undefined : trace.getSpan(current);
}

export type Carrier = Readonly<Record<string, unknown>>;

const getter: TextMapGetter<Carrier> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const v = carrier[key];
    // HTTP may repeat a header; W3C takes the first traceparent. Anything not a string is ignored.
    if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : undefined;
    return typeof v === 'string' ? v : undefined;
  },
};

/** The caller's context from W3C `traceparent` / `tracestate` / `baggage` (HTTP headers, NATS headers); invalid: the root. */
export function extract(carrier: Carrier): Context {
  return propagation.extract(ROOT_CONTEXT, carrier, getter);
}

/** The context W3C headers name, or undefined when they name no valid span (absent, invalid, or no propagator registered). */
export function parentFrom(carrier: Carrier): Context | undefined {
  const ctx = extract(carrier);
  const span = trace.getSpanContext(ctx);
  return span !== undefined && isSpanContextValid(span) ? ctx : undefined;
}

/**
 * JSON-RPC's `params._meta` (the MCP and ACP convention): a non-object `_meta`, or a non-string
 * value in it, is ignored, never an error.
 */
export function fromMeta(meta: unknown): Context {
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) return ROOT_CONTEXT;
  const carrier: Record<string, string> = {};
  for (const key of ['traceparent', 'tracestate', 'baggage']) {
    const v: unknown = Reflect.get(meta, key);
    if (typeof v === 'string') carrier[key] = v;
  }
  return extract(carrier);
}

/** Writes `ctx`'s trace context into `carrier` (NATS headers of an assignment). */
export function inject(ctx: Context, carrier: Record<string, string>): void {
  propagation.inject(ctx, carrier);
}
