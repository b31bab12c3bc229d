// A burst is not a peer that stopped reading. Eight children finish at once, each with a 1.1 MB
// summary: their completions and the delegation's entry (which carries the eight summaries again)
// are ~18 MB queued in one turn, past the default --max-outbound-bytes (8 MiB) before any socket
// could drain. A WebSocket and an event stream that read get every one of them; a WebSocket and an
// event stream whose sockets are paused, attached to the same session, are dropped: their backlog
// stays over the bound and drains nothing for a whole check interval.
import { afterAll, describe, expect, it } from 'vitest';
import { call, connectWs, killAll, nextEvent, scriptedTask, WAIT_MS, type WireEvent } from '../helpers/process.ts';
import { wireEntry } from '../helpers/wire-entry.ts';
import { framesUntil, nextFrame, openSse, startHttp, type Frame } from './client.ts';

afterAll(killAll);

const CHILDREN = 8;
/** ~1.1 MB, tagged so each child's summary differs. */
const summary = (i: number) => `child ${i} `.padEnd(1_100_000, 's');

describe('a burst of large completions at the default --max-outbound-bytes', () => {
  it('reaches a WebSocket and an event stream that read, whole; paused ones are still dropped', { timeout: 60_000 }, async () => {
    // Only the spawn's own frame needs a larger message bound; the outbound bound is the default.
    const server = await startHttp(['--max-concurrent-children', String(CHILDREN), '--max-message-bytes', String(32 << 20)]);
    const { peer } = await connectWs(server);
    const { session_id, session_key } = await call<{ session_id: string; session_key: string }>(peer, 'session.create');
    const path = `/v1/sessions/${session_id}/events?session_key=${encodeURIComponent(session_key)}`;
    const stream = await openSse(server, path);
    await nextFrame(stream, (f) => f.event === 'snapshot');

    // The two that stop reading: attached and subscribed, then their sockets paused.
    const { peer: stalled } = await connectWs(server);
    await call(stalled, 'session.attach', { session_id, session_key });
    stalled.ws.pause();
    const stalledStream = await openSse(server, path);
    await nextFrame(stalledStream, (f) => f.event === 'snapshot');
    stalledStream.pause();
    const wsDrop = server.proc.stderr.take((l) => l.includes('dropping a WebSocket peer that stopped reading'), WAIT_MS, 'the paused socket dropped');
    const sseDrop = server.proc.stderr.take((l) => l.includes('dropping an event stream consumer that stopped reading'), WAIT_MS, 'the paused stream dropped');

    const tasks = Array.from({ length: CHILDREN }, (_, i) => scriptedTask(`big ${i}`, [{ op: 'finish', summary: summary(i) }]));
    const { subagent_ids } = await call<{ subagent_ids: string[] }>(peer, 'delegation.spawn', { session_id, tasks });

    // The WebSocket that reads: every completion, whole, then the delegation's entry and idle.
    const wsEvents: WireEvent[] = [];
    try {
      for (;;) {
        const e = await nextEvent(peer, (x) => x.session_id === session_id, WAIT_MS, 'the burst on the WebSocket');
        wsEvents.push(e);
        if (e.type === 'session.idle') break;
      }
    } catch (err) {
      // Say what the WebSocket got and every drop the server logged: the two paused peers' are
      // expected; a third is a reader dropped as stopped, the bug this test is for.
      const said = server.proc.stderr.all.filter((l) => l.includes('dropping'));
      throw new Error(`${String(err)}; got ${wsEvents.map((e) => e.type).join(', ') || 'nothing'}; the server: ${said.join(' | ') || 'no drop'}`);
    }
    const summaries = (events: readonly { type: string; payload: Record<string, unknown> }[]) =>
      events
        .filter((e) => e.type === 'subagent.complete')
        .map((e) => wireEntry(e.payload).summary)
        .sort();
    const expected = subagent_ids.map((_, i) => summary(i)).sort();
    expect(summaries(wsEvents)).toStrictEqual(expected);
    const wsDone = wsEvents.find((e) => e.type === 'delegation.complete');
    expect((wsDone?.payload.results as unknown[] | undefined)?.length).toBe(CHILDREN);

    // The event stream that reads: the same.
    const frames: Frame[] = await framesUntil(stream, (f) => f.event === 'session.idle');
    const sseEvents = frames.map((f) => JSON.parse(f.data ?? 'null') as WireEvent);
    expect(summaries(sseEvents)).toStrictEqual(expected);
    expect(sseEvents.filter((e) => e.type === 'delegation.complete')).toHaveLength(1);
    expect(sseEvents.map((e) => e.seq)).toStrictEqual(wsEvents.map((e) => e.seq));

    // The paused ones are dropped for having drained nothing, not for the burst.
    const dropped = [JSON.parse(await wsDrop), JSON.parse(await sseDrop)] as { buffered: number }[];
    for (const d of dropped) expect(d.buffered).toBeGreaterThan(8 << 20);
    stalled.ws.resume();
    expect((await stalled.closed).code).toBe(1006);
    stalledStream.resume();
    await stalledStream.frames.whenEnded();

    // The readers were never dropped: the socket answers, the stream is open.
    expect(await call(peer, 'server.info')).toMatchObject({ name: 'subrun' });
    expect(stream.frames.ended).toBe(false);
    expect(server.proc.stderr.all.filter((l) => l.includes('stopped reading'))).toHaveLength(2);
    stream.close();
    await peer.close();
  });
});
