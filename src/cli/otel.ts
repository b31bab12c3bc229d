// The OpenTelemetry SDK for `serve` and `worker`: started only when an endpoint is configured
// (`--otlp-endpoint`, OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT), and loaded by import() only then, so a
// process without tracing loads none of it. A BatchSpanProcessor and the OTLP/HTTP exporter
// (protobuf by default, JSON on request); the exporter itself honours the standard OTEL_* headers,
// timeout and compression, the provider the sampler and OTEL_BSP_*. A collector that is down costs
// at most one stderr line a minute, never a failed call, and never holds the exit past its deadline.
import { UsageError } from './flags.ts';
import { VERSION } from '../version.ts';
import type { Logger } from '../log.ts';

export interface Tracing {
  /** Flushes what is buffered and stops; gives up after `deadline_ms`. */
  shutdown(deadline_ms: number): Promise<void>;
}

export interface TracingOptions {
  readonly endpoint: string | undefined;
  readonly service: string;
  /** A worker's id (`service.instance.id`). */
  readonly instance?: string;
  readonly logger: Logger;
  readonly env?: NodeJS.ProcessEnv;
}

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';
type Protocol = 'http/protobuf' | 'http/json';
const isProtocol = (p: string): p is Protocol => p === 'http/protobuf' || p === 'http/json';

/** Which protocol, or undefined when tracing is off. Throws a UsageError (exit 2) for grpc or anything unknown. */
export function tracingWanted(endpoint: string | undefined, env: NodeJS.ProcessEnv = process.env): Protocol | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === 'none') return undefined;
  if (!set(endpoint) && !set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) && !set(env.OTEL_EXPORTER_OTLP_ENDPOINT)) return undefined;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  if (!isProtocol(protocol)) {
    throw new UsageError(`OTLP protocol ${JSON.stringify(protocol)} is not supported: use http/protobuf (the default) or http/json`);
  }
  return protocol;
}

/** The traces URL of a base endpoint (`http://collector:4318` -> `.../v1/traces`); one ending in /v1/traces stays. */
export function tracesUrl(base: string): string {
  return /\/v1\/traces\/?$/.test(base) ? base : `${base.replace(/\/+$/, '')}/v1/traces`;
}

const QUIET_MS = 60_000;

export async function startTracing(opts: TracingOptions): Promise<Tracing | undefined> {
  const env = opts.env ?? process.env;
  const protocol = tracingWanted(opts.endpoint, env);
  if (protocol === undefined) return undefined;
  const [{ NodeTracerProvider, BatchSpanProcessor }, resources, exporterModule] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
    protocol === 'http/json' ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  // The flag is a base like OTEL_EXPORTER_OTLP_ENDPOINT; without it the exporter reads the variables.
  const exporter = new exporterModule.OTLPTraceExporter(set(opts.endpoint) ? { url: tracesUrl(opts.endpoint) } : {});
  let lastComplaint = -Infinity;
  const complain = (message: string) => {
    const now = Date.now();
    if (now - lastComplaint < QUIET_MS) return;
    lastComplaint = now;
    opts.logger.warn({ message }, 'trace export failed (said at most once a minute)');
  };
  const ours = { 'service.version': VERSION, ...(opts.instance !== undefined ? { 'service.instance.id': opts.instance } : {}) };
  const resource = resources
    .resourceFromAttributes({ 'service.name': opts.service })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(resources.resourceFromAttributes(ours));
  const processor = new BatchSpanProcessor({
    export(spans, done) {
      exporter.export(spans, (result) => {
        if (result.error !== undefined) complain(result.error.message);
        done(result);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush(),
  });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  return {
    async shutdown(deadline_ms) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, deadline_ms)));
      await Promise.race([provider.shutdown().catch((err: unknown) => complain(String(err))), deadline]);
      clearTimeout(timer);
    },
  };
}
