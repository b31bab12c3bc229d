// The event store of one HTTP MCP session (the SDK's EventStore): every SSE message it sent, so a
// dropped stream that comes back with Last-Event-ID gets every later message of that stream once.
// Bounded like the replay ring (--replay-events, --replay-bytes): the oldest go first, and a
// cursor never kept or no longer kept is unknown, which the SDK answers 400 (the host re-reads
// state). Ids are `<n>` in one counter per session, so they say nothing about another session.
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

interface Kept {
  readonly n: number;
  readonly stream: string;
  readonly message: JSONRPCMessage;
  readonly bytes: number;
}

export class BoundedEventStore implements EventStore {
  readonly #max_events: number;
  readonly #max_bytes: number;
  readonly #kept: Kept[] = [];
  #bytes = 0;
  #next = 0;

  constructor(limits: { readonly max_events: number; readonly max_bytes: number }) {
    this.#max_events = limits.max_events;
    this.#max_bytes = limits.max_bytes;
  }

  get size(): { events: number; bytes: number } {
    return { events: this.#kept.length, bytes: this.#bytes };
  }

  storeEvent(stream: string, message: JSONRPCMessage): Promise<string> {
    const n = ++this.#next;
    const bytes = Buffer.byteLength(JSON.stringify(message), 'utf8');
    this.#kept.push({ n, stream, message, bytes });
    this.#bytes += bytes;
    while (this.#kept.length > 0 && (this.#kept.length > this.#max_events || this.#bytes > this.#max_bytes)) {
      const old = this.#kept.shift();
      if (old) this.#bytes -= old.bytes;
    }
    return Promise.resolve(String(n));
  }

  getStreamIdForEventId(id: string): Promise<string | undefined> {
    return Promise.resolve(this.#find(id)?.stream);
  }

  async replayEventsAfter(id: string, { send }: { send: (id: string, message: JSONRPCMessage) => Promise<void> }): Promise<string> {
    const from = this.#find(id);
    if (!from) throw new Error('unknown event id');
    for (const e of this.#kept.filter((k) => k.n > from.n && k.stream === from.stream)) {
      // The SDK's priming events are empty objects: nothing to replay.
      if (Object.keys(e.message).length > 0) await send(String(e.n), e.message);
    }
    return from.stream;
  }

  #find(id: string): Kept | undefined {
    if (!/^\d{1,15}$/.test(id)) return undefined;
    const n = Number(id);
    const first = this.#kept[0];
    if (!first || n < first.n) return undefined;
    return this.#kept[n - first.n];
  }
}
