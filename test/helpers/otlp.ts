// A small OTLP/HTTP trace receiver on 127.0.0.1 for the end-to-end trace tests: every POST to
// /v1/traces is kept as it came (JSON or protobuf bytes), and waiters are told at each one (never
// a sleep). Also the JSON body's spans with their resource, and an attribute reader.
import { createServer, type Server } from 'node:http';

export interface OtlpAttr {
  key: string;
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean };
}

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: OtlpAttr[];
  events?: Array<{ name: string; attributes?: OtlpAttr[] }>;
}

/** A span with the resource attributes of the process that exported it. */
export interface ResourcedSpan extends OtlpSpan {
  readonly resource: readonly OtlpAttr[];
}

export interface Received {
  readonly contentType: string;
  readonly body: Buffer;
}

export interface Collector {
  readonly url: string;
  readonly requests: Received[];
  /** Resolves once `pred` holds (checked now and after each request). */
  until(pred: () => boolean): Promise<void>;
  close(): Promise<void>;
}

export async function collector(): Promise<Collector> {
  const requests: Received[] = [];
  const waiters = new Set<() => void>();
  const server: Server = createServer((rq, rs) => {
    const chunks: Buffer[] = [];
    rq.on('data', (c: Buffer) => chunks.push(c));
    rq.on('end', () => {
      if (rq.url === '/v1/traces') requests.push({ contentType: rq.headers['content-type'] ?? '', body: Buffer.concat(chunks) });
      rs.writeHead(200, { 'content-type': rq.headers['content-type'] ?? 'application/json' }).end(rq.headers['content-type']?.includes('json') ? '{}' : '');
      for (const w of [...waiters]) w();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    until: (pred) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!pred()) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface OtlpBody {
  resourceSpans: Array<{ resource?: { attributes?: OtlpAttr[] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
}

/** Every span of the JSON requests, each with its resource. */
export const spansOf = (requests: readonly Received[]): ResourcedSpan[] =>
  requests.flatMap((r) =>
    (JSON.parse(r.body.toString('utf8')) as OtlpBody).resourceSpans.flatMap((rs) =>
      rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ ...s, resource: rs.resource?.attributes ?? [] }))),
    ),
  );

/** An attribute's value (an int as a number). */
export function attr(s: { attributes?: readonly OtlpAttr[] }, key: string): string | number | boolean | undefined {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : v?.boolValue);
}

/** A resource attribute of the process that exported `s`. */
export const resourceAttr = (s: ResourcedSpan, key: string) => attr({ attributes: s.resource }, key);
