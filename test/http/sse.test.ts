// The event stream against a real server: `retry` first, a snapshot then every later event live
// (the same envelopes a WebSocket gets, ids = seq), exact resume from Last-Event-ID out of the
// replay ring (no gap, no duplicate), `reset` when the cursor is gone, the end of the stream when
// the session closes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectWs, killAll, nextEvent, request, type WireEvent } from '../helpers/process.ts';
import { createSession, envelope, framesUntil, nextFrame, openSse, req, scripted, spawn, startHttp, type HttpServer, type Session } from './client.ts';

let server: HttpServer;
beforeAll(async () => {
  server = await startHttp(['--replay-events', '8']);
});
afterAll(killAll);

const events = (s: Session) => `/v1/sessions/${s.session_id}/events?session_key=${encodeURIComponent(s.session_key)}`;
const steps = (n: number) => [
  ...Array.from({ length: n }, (_, i) => ({ op: 'say', text: `line ${i}` })),
  { op: 'wait_steer' },
  { op: 'finish', summary: 'ok' },
];

async function steerAndWaitIdle(s: Session, id: string): Promise<void> {
  const r = await req(server, 'POST', `/v1/sessions/${s.session_id}/subagents/${id}/steer`, { key: s.session_key, body: { text: 'finish' } });
  expect(r.status).toBe(202);
}

describe('the event stream', () => {
  it('starts with retry and a snapshot of that instant, then every later event, as the WebSocket sends it', async () => {
    const s = await createSession(server);
    const { peer } = await connectWs(server);
    expect((await request(peer, 'session.attach', { session_id: s.session_id, session_key: s.session_key })).result).toBeDefined();
    const { subagent_ids } = await spawn(server, s, [scripted('talks', steps(2))]);
    const id = subagent_ids[0] as string;
    await req(server, 'GET', `/v1/sessions/${s.session_id}/subagents/${id}/tail`, { key: s.session_key });
    const stream = await openSse(server, events(s));
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const first = await stream.frames.take();
    expect(first).toEqual({ retry: '2000' });
    const snap = await nextFrame(stream);
    expect(snap.event).toBe('snapshot');
    const snapshot = JSON.parse(snap.data ?? '');
    expect(snap.id).toBe(String(snapshot.seq));
    expect(snapshot.subagents).toMatchObject([{ subagent_id: id }]);
    await steerAndWaitIdle(s, id);
    const live = await framesUntil(stream, (f) => f.event === 'session.idle');
    // Exactly the events after the snapshot, contiguous, with id = seq and event = type.
    const seqs = live.map((f) => Number(f.id));
    expect(seqs).toEqual(seqs.map((_, i) => snapshot.seq + 1 + i));
    for (const f of live) expect(envelope(f)).toMatchObject({ type: f.event, seq: Number(f.id), session_id: s.session_id });
    // The same bytes the WebSocket got for those seqs.
    const ws: WireEvent[] = [];
    for (;;) {
      const e = await nextEvent(peer, (x) => x.session_id === s.session_id);
      ws.push(e);
      if (e.type === 'session.idle') break;
    }
    const wsAfter = ws.filter((e) => e.seq > snapshot.seq);
    expect(live.map((f) => JSON.parse(f.data ?? ''))).toEqual(wsAfter);
    stream.close();
    await peer.close();
  });

  it('resumes from Last-Event-ID exactly: every event after it, none twice, then live', async () => {
    const s = await createSession(server);
    const stream = await openSse(server, events(s));
    await nextFrame(stream, (f) => f.event === 'snapshot');
    const { subagent_ids } = await spawn(server, s, [scripted('talks', steps(1))]);
    const firstPart = await framesUntil(stream, (f) => f.event === 'subagent.text');
    stream.close();
    const cursor = firstPart.at(-2)?.id ?? '0';
    // Some events come while nobody watches.
    await steerAndWaitIdle(s, subagent_ids[0] as string);
    const d = await req(server, 'GET', `/v1/sessions/${s.session_id}`, { key: s.session_key });
    const resumed = await openSse(server, events(s), { 'Last-Event-ID': cursor });
    const rest = await framesUntil(resumed, (f) => f.event === 'session.idle');
    expect(rest.map((f) => Number(f.id))).toEqual(rest.map((_, i) => Number(cursor) + 1 + i));
    expect(Number(rest.at(-1)?.id)).toBeGreaterThanOrEqual(d.json.latest_seq);
    // The replayed ones are byte for byte what a full subscriber saw.
    const overlap = firstPart.filter((f) => Number(f.id) > Number(cursor));
    expect(rest.slice(0, overlap.length).map((f) => f.data)).toEqual(overlap.map((f) => f.data));
    resumed.close();
  });

  it('takes the cursor from ?last_event_id= as well; a malformed one is 400', async () => {
    const s = await createSession(server);
    await spawn(server, s, [scripted('quick', [{ op: 'finish', summary: 'ok' }])]);
    const probe = await openSse(server, events(s));
    await nextFrame(probe, (f) => f.event === 'snapshot');
    probe.close();
    const stream = await openSse(server, `${events(s)}&last_event_id=0`);
    const all = await framesUntil(stream, (f) => f.event === 'session.idle');
    expect(all.map((f) => Number(f.id))).toEqual(all.map((_, i) => i + 1));
    stream.close();
    const bad = await req(server, 'GET', `${events(s)}&last_event_id=abc`);
    expect(bad.status).toBe(400);
    expect(bad.json.error.data.issues[0].path).toBe('last_event_id');
  });

  it('a cursor older than the ring (or past the latest seq) gets reset with the snapshot, then live', async () => {
    const s = await createSession(server);
    const watch = await openSse(server, events(s));
    await nextFrame(watch, (f) => f.event === 'snapshot');
    const { subagent_ids } = await spawn(server, s, [scripted('talks', steps(12))]);
    const id = subagent_ids[0] as string;
    // Past the ring of 8 events: the twelfth line is at least the fifteenth event.
    await framesUntil(watch, (f) => f.event === 'subagent.text' && envelope(f).payload.text === 'line 11');
    watch.close();
    for (const cursor of ['1', '999999']) {
      const stream = await openSse(server, events(s), { 'Last-Event-ID': cursor });
      const reset = await nextFrame(stream);
      expect(reset.event).toBe('reset');
      const snap = JSON.parse(reset.data ?? '');
      expect(reset.id).toBe(String(snap.seq));
      expect(snap.subagents).toMatchObject([{ subagent_id: id }]);
      if (cursor === '999999') {
        await steerAndWaitIdle(s, id);
        const live = await framesUntil(stream, (f) => f.event === 'session.idle');
        expect(live.map((f) => Number(f.id))).toEqual(live.map((_, i) => snap.seq + 1 + i));
      }
      stream.close();
    }
  });

  it('ends when the session closes', async () => {
    const s = await createSession(server);
    const stream = await openSse(server, events(s));
    await nextFrame(stream, (f) => f.event === 'snapshot');
    expect((await req(server, 'DELETE', `/v1/sessions/${s.session_id}`, { key: s.session_key })).status).toBe(200);
    await stream.frames.whenEnded();
  });

  it('keeps a session from parking while it streams, and takes the key in the header too', async () => {
    const short = await startHttp(['--park-ttl-ms', '300']);
    const s = await createSession(short);
    const stream = await openSse(short, `/v1/sessions/${s.session_id}/events`, { 'X-Subrun-Session-Key': s.session_key });
    await nextFrame(stream, (f) => f.event === 'snapshot');
    // Longer than the park TTL, measured by the server's own work: a child that sleeps past it.
    const d = await spawn(short, s, [
      scripted('sleeps', [
        { op: 'sleep', ms: 600 },
        { op: 'finish', summary: 'ok' },
      ]),
    ]);
    await framesUntil(stream, (f) => f.event === 'session.idle');
    expect((await req(short, 'GET', `/v1/sessions/${s.session_id}/delegations/${d.delegation_id}`, { key: s.session_key })).json.done).toBe(true);
    stream.close();
  });
});
