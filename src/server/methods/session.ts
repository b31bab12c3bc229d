// session.* : create, attach, resume, activate, detach, reset, close, list, events.since,
// events.stats and timeline. The authority
// model itself is sessions.ts.
import type { ParamsOf } from '../../contract/methods.ts';
import type { Services } from '../context.ts';
import { JsonText } from '../json-text.ts';
import type { Session } from '../sessions.ts';
import { defineMethod, type ResultOf } from './define.ts';
import { withProps } from '../../shapes.ts';

/**
 * What create, resume and activate tell a host about a session, with hermes' required fields:
 * the id to resume by (the session id: subrun keeps no other), the parent conversation as rows,
 * and the live info. Never the key.
 */
function sessionView(server: Pick<Services, 'parents' | 'model' | 'cwd'>, s: Session): Omit<ResultOf<'session.create'>, 'session_key'> {
  const parent = server.parents.peek(s.session_id);
  const messages = parent?.transcript() ?? [];
  return {
    session_id: s.session_id,
    stored_session_id: s.session_id,
    generation: s.generation,
    message_count: messages.length,
    messages,
    info: {
      pong: true,
      model: server.model,
      running: parent?.running ?? false,
      title: s.title ?? '',
      cwd: server.cwd,
      stored_session_id: s.session_id,
    },
  };
}

/** session.resume and session.activate: the same re-bind (hermes names it both ways). */
const rebind =
  (verb: string) =>
  (p: ParamsOf<'session.resume'>, server: Services, transport: string): ResultOf<'session.resume'> => {
    let s;
    try {
      s = server.sessions.rebind(p.session_id, p.session_key, transport);
    } catch (err) {
      server.logger.warn({ transport }, `session ${verb} refused`);
      throw err;
    }
    if (p.close_on_disconnect !== undefined) server.sessions.setCloseOnDisconnect(s, p.close_on_disconnect);
    server.logger.info({ session_id: s.session_id, transport }, `session ${verb}d`);
    const live_subagents = server.runtime.scoped.list(server.sessions.scopeOf(s)).length;
    return withProps(sessionView(server, s), { live_subagents, open_requests: [] });
  };

/** Commits what is queued, so that a read sees every event sent so far; a failing store leaves it at what is written. */
function commitFirst(server: Services): void {
  try {
    server.store.flush();
  } catch {
    // unavailable: the read stops at the last written seq
  }
}

export const sessionMethods = {
  'session.create': defineMethod(
    'session.create',
    (p, server, transport) => {
      const { session, session_key } = server.sessions.create(transport, p.title ?? undefined, p.close_on_disconnect ?? false);
      server.logger.info({ session_id: session.session_id, transport }, 'session created');
      return withProps(sessionView(server, session), { session_key });
    },
    { writes: true },
  ),

  'session.resume': defineMethod('session.resume', rebind('resume')),
  'session.activate': defineMethod('session.activate', rebind('activate')),

  'session.attach': defineMethod('session.attach', (p, server, transport) => {
    let s;
    try {
      s = server.sessions.attach(p.session_id, p.session_key, transport);
    } catch (err) {
      server.logger.warn({ transport }, 'session attach refused');
      throw err;
    }
    server.logger.info({ session_id: s.session_id, transport }, 'session attached');
    const live_subagents = server.runtime.scoped.list(server.sessions.scopeOf(s)).length;
    return { session_id: s.session_id, generation: s.generation, live_subagents };
  }),

  'session.detach': defineMethod('session.detach', (p, server, transport) => {
    server.sessions.detach(p.session_id, transport);
    server.logger.info({ session_id: p.session_id, transport }, 'session detached');
    return { detached: true } as const;
  }),

  'session.reset': defineMethod(
    'session.reset',
    (p, server, transport) => {
      const { session, retired } = server.sessions.reset(p.session_id, transport);
      server.parents.peek(session.session_id)?.reset();
      server.logger.info({ session_id: session.session_id, transport, generation: session.generation }, 'session reset');
      // Fail closed: the old generation's children stop, and nothing of theirs reaches the session.
      // Nothing of theirs is kept either: no scope can reach them again.
      server.runtime.retireGeneration(session.session_id, retired);
      server.ledger.retireBefore(session.session_id, session.generation);
      return { session_id: session.session_id, generation: session.generation };
    },
    { idempotent: true, writes: true },
  ),

  'session.close': defineMethod(
    'session.close',
    (p, server, transport) => {
      const s = server.sessions.authorize(p.session_id, transport);
      const interrupted = server.runtime.interruptSession(s.session_id).length;
      server.sessions.close(s.session_id, transport);
      server.logger.info({ session_id: s.session_id, transport, interrupted }, 'session closed');
      return { closed: true, interrupted };
    },
    { writes: true },
  ),

  // hermes hosts list and size what they may resume at start. The caller's sessions only: those
  // its transport is attached to (every live one with --single-user, where the token owns all).
  'session.list': defineMethod('session.list', (p, server, transport) => {
    // Newest first. The sessions come in the order they were made; reversed before a stable sort,
    // two made in one clock tick (one `created_at`) keep the later one first.
    const mine = server.sessions
      .sessionsFor(transport)
      .reverse()
      .sort((a, b) => b.created_at - a.created_at);
    const rows = mine.slice(0, p.limit ?? mine.length).map((s) => ({
      id: s.session_id,
      title: s.title ?? '',
      // subrun keeps no preview or source per session: hermes' defaults for "none".
      preview: '',
      started_at: s.created_at,
      message_count: server.parents.peek(s.session_id)?.transcript().length ?? 0,
      source: '',
    }));
    return { sessions: rows };
  }),

  'session.events.stats': defineMethod('session.events.stats', (_p, server, transport) => {
    const mine = server.sessions.sessionsFor(transport);
    const { replay_events, replay_bytes } = server.limits;
    return {
      sessions: mine.length,
      events: mine.reduce((n, s) => n + s.replay.size, 0),
      bytes: mine.reduce((n, s) => n + s.replay.bytes, 0),
      max_per_session: replay_events,
      max_bytes_per_session: replay_bytes,
      max_bytes_process: replay_bytes * mine.length,
    };
  }),

  // A host that reconnects fills its gap: every kept event after last_seen, as the very envelopes
  // that were sent. Readable by an attached transport or with the session key (a host may replay
  // before it re-attaches); it attaches nothing.
  'session.events.since': defineMethod('session.events.since', (p, server, transport) => {
    const s = server.sessions.authorizeRead(p.session_id, p.session_key, transport);
    // What is sent is written first; a replay hands out no more than that (docs/durability.md).
    commitFirst(server);
    const r = s.replay.since(p.last_seen ?? 0, s.committed);
    const events = r.events.map((e) => e.text).join(',');
    return new JsonText(
      `{"events":[${events}],"latest_seq":${r.latest_seq},"truncated":${r.truncated},"count":${r.events.length},"epoch":${JSON.stringify(server.replay_epoch)},"open_requests":[]}`,
    );
  }),

  // The dashboard's timeline (docs/observability.md): the runtime's, for the session's live generation.
  'session.timeline': defineMethod('session.timeline', (p, { sessions, runtime }, transport) => {
    const s = sessions.authorize(p.session_id, transport);
    return runtime.scoped.timeline(sessions.scopeOf(s));
  }),
} as const;
