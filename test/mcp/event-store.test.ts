// The HTTP session's event store: bounded like the replay ring (events and bytes, oldest first),
// a replay gives the later events of the cursor's own stream once, and a cursor never kept or no
// longer kept is unknown (the SDK answers 400).
import { describe, expect, it } from 'vitest';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { BoundedEventStore } from '../../src/mcp/event-store.ts';

const note = (n: number): JSONRPCMessage => ({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: n } });

async function replay(store: BoundedEventStore, after: string): Promise<{ stream: string; sent: Array<[string, JSONRPCMessage]> }> {
  const sent: Array<[string, JSONRPCMessage]> = [];
  const stream = await store.replayEventsAfter(after, { send: (id, m) => Promise.resolve(void sent.push([id, m])) });
  return { stream, sent };
}

describe('BoundedEventStore', () => {
  it('replays the later events of the cursor’s stream only, each once', async () => {
    const store = new BoundedEventStore({ max_events: 100, max_bytes: 1 << 20 });
    const ids = [];
    for (let i = 1; i <= 6; i++) ids.push(await store.storeEvent(i % 2 === 0 ? 'b' : 'a', note(i)));
    expect(await store.getStreamIdForEventId(ids[0] ?? '')).toBe('a');
    const r = await replay(store, ids[0] ?? '');
    expect(r.stream).toBe('a');
    expect(r.sent).toEqual([
      [ids[2], note(3)],
      [ids[4], note(5)],
    ]);
  });

  it('keeps at most max_events and max_bytes; an evicted or made-up cursor is unknown', async () => {
    const store = new BoundedEventStore({ max_events: 3, max_bytes: 1 << 20 });
    const ids = [];
    for (let i = 1; i <= 5; i++) ids.push(await store.storeEvent('a', note(i)));
    expect(store.size.events).toBe(3);
    expect(await store.getStreamIdForEventId(ids[1] ?? '')).toBeUndefined();
    expect(await store.getStreamIdForEventId('999')).toBeUndefined();
    expect(await store.getStreamIdForEventId('not-an-id')).toBeUndefined();
    await expect(replay(store, ids[0] ?? '')).rejects.toThrow();
    expect((await replay(store, ids[2] ?? '')).sent.map(([id]) => id)).toEqual([ids[3], ids[4]]);

    const small = new BoundedEventStore({ max_events: 100, max_bytes: 2 * JSON.stringify(note(1)).length });
    for (let i = 1; i <= 5; i++) await small.storeEvent('a', note(i));
    expect(small.size.events).toBe(2);
    expect(small.size.bytes).toBeLessThanOrEqual(2 * JSON.stringify(note(1)).length);
  });
});
