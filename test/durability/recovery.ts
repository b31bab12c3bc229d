// What a host does after the server it used was killed and started again on the same state
// directory, as durability.md tells it to: reconnect, re-bind each session with its key, replay
// from its watermark, read the ring, wait for the completions, ask delegation.result, retry the
// keyed spawns. Each step records what it got in the history and checks it as it goes.
import type { RpcReply, WireEvent } from '../helpers/rpc-client.ts';
import { canonical, connectHost, mustCall, sessionEvents, within, type Host, type Server } from './harness.ts';
import {
  announced,
  completionFacts,
  completions,
  entryFacts,
  merge,
  ordered,
  P1,
  P2,
  P4,
  P5,
  P6,
  QUIET,
  short,
  type History,
  type Violations,
} from './oracle.ts';
import { watermarks, type Ledger, type SessionRec, type SpawnRec } from './schedule.ts';

/** A bound on events the restart should already have produced (before it listened). */
const SETTLE_MS = 5_000;

interface Since {
  events: WireEvent[];
  latest_seq: number;
  truncated: boolean;
  count: number;
  epoch: string;
}

/** The new connections, one per host of the round, each re-bound to the sessions it had (promise 1). */
export async function reattach(server: Server, ledger: Ledger, epoch: string, v: Violations): Promise<Host[]> {
  const hosts = await Promise.all(ledger.hosts.map((_, i) => connectHost(server, i)));
  for (const { session, host } of watermarks(ledger)) {
    const reply = await ask(hosts[host]!, 'session.attach', { session_id: session.session_id, session_key: session.session_key });
    if (reply.error) v.add(P1, `session.attach {${session.session_id}, its key} by host ${host} answered ${reply.error.code} ${reply.error.message}`);
  }
  for (const h of hosts) {
    const got = h.ready.payload.replay_epoch;
    if (got !== epoch) v.add(P4, `gateway.ready on host ${h.index} has replay_epoch ${String(got)}, before the kill it was ${epoch}`);
  }
  return hosts;
}

/** A call whose reply (result or error) the check reads; bounded, since a server may hang. */
function ask(host: Host, method: string, params: Record<string, unknown>): Promise<RpcReply> {
  return within(host.client.call(method, params), SETTLE_MS, `the reply to ${method}`);
}

function since(host: Host, session: SessionRec, last_seen?: number): Promise<Since> {
  const params = { session_id: session.session_id, session_key: session.session_key, ...(last_seen === undefined ? {} : { last_seen }) };
  return mustCall<Since>(host, 'session.events.since', params);
}

/** The seqs of `events` are from+1, from+2, ...: no duplicate of what was seen, no gap. */
function contiguous(events: readonly WireEvent[], from: number): string | undefined {
  const bad = events.findIndex((e, i) => e.seq !== from + 1 + i);
  return bad < 0 ? undefined : `seqs ${events.map((e) => e.seq).join(',')} after ${from}`;
}

/**
 * Promise 4: each host's replay from its own watermark, then each session's whole ring, which must
 * hold every event any host was sent with the same seq and content. Returns the merged history.
 */
export async function replay(ledger: Ledger, hosts: Host[], epoch: string, v: Violations): Promise<History> {
  const history: History = new Map();
  for (const { session, host, last_seen } of watermarks(ledger)) {
    const r = await since(hosts[host]!, session, last_seen);
    const what = `session.events.since {${session.session_id}, last_seen: ${last_seen}} by host ${host}`;
    if (r.truncated) v.add(P4, `${what} says truncated within the default bounds`);
    if (r.epoch !== epoch) v.add(P4, `${what} has epoch ${r.epoch}, before the kill it was ${epoch}`);
    const gap = contiguous(r.events, last_seen);
    if (gap) v.add(P4, `${what} returned ${gap}`);
    if (r.latest_seq !== (r.events.at(-1)?.seq ?? last_seen)) v.add(P4, `${what}: latest_seq ${r.latest_seq}, the last event has ${r.events.at(-1)?.seq}`);
    merge(history, session.session_id, r.events, `the replay to host ${host}`, v);
  }
  for (const session of ledger.sessions) {
    const ring = await since(hosts[session.hosts[0]!]!, session);
    const what = `the ring of session ${session.session_id}`;
    if (ring.truncated) v.add(P4, `${what} says truncated within the default bounds`);
    const gap = contiguous(ring.events, 0);
    if (gap) v.add(P4, `${what} holds ${gap}`);
    merge(history, session.session_id, ring.events, what, v);
    const kept = new Set(ring.events.map((e) => e.seq));
    for (const h of ledger.hosts) {
      const seen = sessionEvents(h, session.session_id);
      for (const e of seen) if (!kept.has(e.seq)) v.add(P4, `${what} lacks seq ${e.seq} (${e.type}), which host ${h.index} was sent before the kill`);
      merge(history, session.session_id, seen, `host ${h.index} before the kill`, v);
    }
  }
  return history;
}

/** Adds what the new connections received live since they re-bound. */
export function mergeLive(ledger: Ledger, hosts: Host[], history: History, v: Violations): void {
  for (const session of ledger.sessions) {
    for (const h of hosts) merge(history, session.session_id, sessionEvents(h, session.session_id), `host ${h.index} after the restart`, v);
  }
}

/** Waits (for the event, bounded) for every announced child's completion that is not in yet. */
export async function awaitCompletions(ledger: Ledger, hosts: Host[], history: History, v: Violations): Promise<void> {
  const waits = [...announced(ledger, history).values()]
    .filter((child) => completions(history, child).length === 0)
    .map(async (child) => {
      const session = ledger.sessions.find((s) => s.session_id === child.sid)!;
      const host = hosts[session.hosts[0]!]!;
      const done = host.client.waitForEvent((e) => e.type === 'subagent.complete' && e.payload.subagent_id === child.id);
      await within(done, SETTLE_MS, `the completion of ${child.id}`).catch(() =>
        v.add(P2, `child ${child.id} (${child.goal}) had no completion ${SETTLE_MS} ms after the restart`),
      );
    });
  await Promise.all(waits);
  mergeLive(ledger, hosts, history, v);
}

/**
 * Waits (for the event, bounded) for the delegation.complete of every delegation dispatched in the
 * round's sessions: it follows its last child's completion by a turn, so it may trail the ring.
 */
export async function awaitDelegations(ledger: Ledger, hosts: Host[], history: History, v: Violations): Promise<void> {
  const waits = ledger.sessions.flatMap((session) => {
    const events = ordered(history, session.session_id);
    const done = new Set(events.filter((e) => e.type === 'delegation.complete').map((e) => e.payload.delegation_id));
    const open = events.filter((e) => e.type === 'delegation.dispatched' && !done.has(e.payload.delegation_id));
    const host = hosts[session.hosts[0]!]!;
    return open.map(async (d) => {
      const complete = host.client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === d.payload.delegation_id);
      await within(complete, SETTLE_MS, 'a delegation.complete').catch(() =>
        v.add(P5, `delegation ${String(d.payload.delegation_id)} had no delegation.complete ${SETTLE_MS} ms after the restart`),
      );
    });
  });
  await Promise.all(waits);
  mergeLive(ledger, hosts, history, v);
}

/** Promise 5: every delegation a spawn reply named answers, done, its entries as the completions say. */
export async function checkResults(ledger: Ledger, hosts: Host[], history: History, v: Violations): Promise<void> {
  const answered = new Map<string, SpawnRec>();
  for (const s of ledger.spawns) if (s.reply) answered.set(s.reply.delegation_id, s);
  for (const [delegation_id, spawn] of answered) {
    const session = ledger.sessions.find((x) => x.session_id === spawn.session_id)!;
    const reply = await ask(hosts[session.hosts[0]!]!, 'delegation.result', { session_id: session.session_id, delegation_id });
    const what = `delegation.result of ${delegation_id}`;
    if (reply.error) {
      v.add(P5, `${what} answered ${reply.error.code} ${reply.error.message}`);
      continue;
    }
    const r = reply.result as { done: boolean; results: Array<Parameters<typeof entryFacts>[0]> };
    if (!r.done || r.results.length !== spawn.reply!.subagent_ids.length)
      v.add(P5, `${what}: done ${r.done} with ${r.results.length} of ${spawn.reply!.subagent_ids.length} entries`);
    const events = ordered(history, session.session_id);
    for (const entry of r.results) {
      const done = events.find((e) => e.type === 'subagent.complete' && e.payload.subagent_id === entry.subagent_id);
      if (spawn.reply!.subagent_ids[entry.task_index] !== entry.subagent_id)
        v.add(P5, `${what}: entry ${entry.task_index} is ${entry.subagent_id}, the spawn answered ${spawn.reply!.subagent_ids.join(',')}`);
      else if (!done || canonical(entryFacts(entry)) !== canonical(completionFacts(done))) {
        v.add(P5, `${what}: entry ${short(entryFacts(entry))} differs from the completion ${short(done && completionFacts(done))}`);
      }
    }
  }
}

/** The delegation ids the ring shows for a spawn's goals: what its effect was, if it had one. */
function delegationsOf(history: History, spawn: SpawnRec): Set<string> {
  const goals = new Set(spawn.params.tasks.map((t) => t.goal));
  const ids = ordered(history, spawn.session_id).filter((e) => e.type === 'subagent.spawn_requested' && goals.has(e.payload.goal as string));
  return new Set(ids.map((e) => e.payload.delegation_id as string));
}

/** A delegation a retry made anew after the restart: its children run and must be stopped. */
export interface Fresh {
  readonly session: SessionRec;
  readonly delegation_id: string;
  readonly subagent_ids: string[];
}

/**
 * Promise 6: each idempotency key is sent again with its params. A key answered before the kill
 * replays that answer; one whose every reply the kill swallowed replays the delegation the ring
 * shows, or, if the ring shows none (its effect was not persisted), spawns anew.
 */
export async function retryKeys(ledger: Ledger, hosts: Host[], history: History, v: Violations): Promise<Fresh[]> {
  const byKey = new Map<string, SpawnRec[]>();
  for (const s of ledger.spawns) {
    const key = s.params.idempotency_key;
    if (key !== undefined && !s.error) byKey.set(key, [...(byKey.get(key) ?? []), s]);
  }
  const fresh: Fresh[] = [];
  for (const [key, sent] of byKey) {
    const answers = new Set(sent.flatMap((s) => (s.reply ? [JSON.stringify([s.reply.delegation_id, s.reply.subagent_ids])] : [])));
    if (answers.size > 1) v.add(P6, `key ${key} got different answers before the kill: ${[...answers].join(' vs ')}`);
    const ring = delegationsOf(history, sent[0]!);
    if (ring.size > 1) v.add(P6, `key ${key} made ${ring.size} delegations: ${[...ring].join(', ')}`);
    const first = sent.find((s) => s.reply)?.reply;
    const session = ledger.sessions.find((x) => x.session_id === sent[0]!.session_id)!;
    const reply = await ask(hosts[session.hosts[0]!]!, 'delegation.spawn', sent[0]!.params);
    if (reply.error) {
      v.add(P6, `key ${key} sent again after the restart answered ${reply.error.code} ${reply.error.message}`);
      continue;
    }
    const again = reply.result as NonNullable<SpawnRec['reply']>;
    const expected = first?.delegation_id ?? [...ring][0];
    if (expected === undefined) {
      fresh.push({ session, delegation_id: again.delegation_id, subagent_ids: again.subagent_ids });
      continue;
    }
    const told = first ? 'its answer before the kill' : 'the delegation its lost request made';
    if (again.delegation_id !== expected || again.idempotent_replay !== true) {
      v.add(P6, `key ${key} sent again after the restart got ${short(again)}, not ${told} (${expected}) replayed`);
    } else if (first && JSON.stringify(again.subagent_ids) !== JSON.stringify(first.subagent_ids)) {
      v.add(P6, `key ${key} replayed subagent_ids ${again.subagent_ids.join(',')}, before the kill ${first.subagent_ids.join(',')}`);
    }
  }
  return fresh;
}

/** Replays spawn nothing: after the retries, the only new first-level children are the fresh ones. */
export async function checkNoNewChildren(ledger: Ledger, hosts: Host[], history: History, fresh: readonly Fresh[], v: Violations): Promise<void> {
  const allowed = new Set(fresh.map((f) => f.delegation_id));
  for (const session of ledger.sessions) {
    const after = await since(hosts[session.hosts[0]!]!, session, ordered(history, session.session_id).at(-1)?.seq ?? 0);
    for (const e of after.events) {
      if (e.type === 'subagent.spawn_requested' && e.payload.depth === 0 && !allowed.has(e.payload.delegation_id as string)) {
        v.add(P6, `a retried key spawned ${short(e.payload)}`);
      }
    }
  }
}

/**
 * Stops what the fresh retries started and waits until each session is quiet again (its
 * session.idle after the last fresh delegation.complete), so that the next round on this
 * directory finds nothing running and this round's rings no longer change.
 */
export async function stopFresh(hosts: Host[], fresh: readonly Fresh[]): Promise<void> {
  const completes = fresh.map(({ session, delegation_id, subagent_ids }) => {
    const host = hosts[session.hosts[0]!]!;
    const done = host.client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === delegation_id);
    // Interrupting the first-level children stops their subtrees; the delegation.complete says when.
    for (const id of subagent_ids) void host.client.call('subagent.interrupt', { session_id: session.session_id, subagent_id: id }).catch(() => undefined);
    return within(done, SETTLE_MS, `the delegation.complete of ${delegation_id}`).then((e) => ({ session, host, seq: e.seq }));
  });
  const quiet = new Map<string, { host: Host; seq: number }>();
  for (const { session, host, seq } of await Promise.all(completes)) {
    quiet.set(session.session_id, { host, seq: Math.max(seq, quiet.get(session.session_id)?.seq ?? 0) });
  }
  await Promise.all(
    [...quiet].map(([sid, { host, seq }]) =>
      within(
        host.client.waitForEvent((e) => e.type === 'session.idle' && e.session_id === sid && e.seq > seq),
        SETTLE_MS,
        `session.idle of ${sid}`,
      ),
    ),
  );
}

export interface Snapshot {
  readonly session: SessionRec;
  readonly ring: WireEvent[];
}

/** Each session's whole ring now, to compare after later restarts on the same directory. */
export async function snapshotRings(ledger: Ledger, hosts: Host[]): Promise<Snapshot[]> {
  return Promise.all(ledger.sessions.map(async (session) => ({ session, ring: (await since(hosts[session.hosts[0]!]!, session)).events })));
}

/**
 * Sessions of earlier rounds on this directory: still there with their key (promise 1), their
 * ring as it was (promise 4), and nothing added to it: they were quiet, so a start settles nothing.
 */
export async function checkEarlier(host: Host, earlier: readonly Snapshot[], v: Violations): Promise<void> {
  for (const { session, ring } of earlier) {
    const what = `session ${session.session_id} of an earlier round`;
    const reply = await ask(host, 'session.attach', { session_id: session.session_id, session_key: session.session_key });
    if (reply.error) {
      v.add(P1, `${what}: session.attach answered ${reply.error.code} ${reply.error.message}`);
      continue;
    }
    const now = (await since(host, session)).events;
    if (canonical(now.slice(0, ring.length)) !== canonical(ring)) v.add(P4, `${what}: its ring of ${ring.length} events changed (now ${now.length})`);
    else if (now.length > ring.length) v.add(QUIET, `${what} was quiet, yet it has new events: ${short(now.slice(ring.length))}`);
  }
}
