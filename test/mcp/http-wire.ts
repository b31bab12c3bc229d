// Raw HTTP against /mcp for what the SDK's client hides: statuses and headers of refusals, a Host
// header of our choosing (fetch forbids setting it), SSE event ids, a stream dropped mid-call and
// resumed with Last-Event-ID.
import { request as httpRequest } from 'node:http';

export const PROTOCOL = '2025-11-25';

export interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** One request with exactly these headers (Host included), the whole body read. */
export function raw(port: number, method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, setHost: headers.Host === undefined }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export interface SseEvent {
  readonly id: string | undefined;
  readonly data: string;
}

/** Parses complete SSE events out of `text` (LF-separated, as the SDK writes them). */
export function sseEvents(text: string): SseEvent[] {
  const out: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    let id: string | undefined;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith('id:')) id = line.slice(3).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
    }
    out.push({ id, data: data.join('\n') });
  }
  return out;
}

export const mcpHeaders = (token: string, session?: string): Record<string, string> => ({
  Authorization: `Bearer ${token}`,
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
  'MCP-Protocol-Version': PROTOCOL,
  ...(session === undefined ? {} : { 'Mcp-Session-Id': session }),
});

/** An SSE response read event by event until `until` says stop; the request is then aborted (a dropped stream). */
export async function readUntil(res: Response, until: (events: SseEvent[]) => boolean, abort: AbortController): Promise<SseEvent[]> {
  const reader = res.body?.getReader();
  if (!reader) throw new Error('no body');
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    const complete = text.slice(0, text.lastIndexOf('\n\n') + 2);
    const events = sseEvents(complete);
    if (until(events)) {
      abort.abort();
      return events;
    }
  }
  return sseEvents(text);
}

export const initializeBody = (id: number | string = 0) =>
  JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
