// session.* : create, attach, detach, reset, close. The authority model itself is sessions.ts.
import { defineMethod, type MethodDef } from '../context.ts';
import { paramsSchemas } from '../../contract/wire.ts';
import { JsonText } from '../json-text.ts';

export const sessionMethods: Record<string, MethodDef> = {
  'session.create': defineMethod(paramsSchemas['session.create'], (p, { server, transport }) => {
    const { session, session_key } = server.sessions.create(transport, p.title);
    server.logger.info({ session_id: session.session_id, transport }, 'session created');
    return { session_id: session.session_id, session_key, generation: session.generation };
  }),

  'session.attach': defineMethod(paramsSchemas['session.attach'], (p, { server, transport }) => {
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

  'session.detach': defineMethod(paramsSchemas['session.detach'], (p, { server, transport }) => {
    server.sessions.detach(p.session_id, transport);
    server.logger.info({ session_id: p.session_id, transport }, 'session detached');
    return { detached: true };
  }),

  'session.reset': defineMethod(paramsSchemas['session.reset'], (p, { server, transport }) => {
    const { session, retired } = server.sessions.reset(p.session_id, transport);
    server.parentOf(session.session_id).reset();
    server.logger.info({ session_id: session.session_id, transport, generation: session.generation }, 'session reset');
    // Fail closed: the old generation's children stop, and nothing of theirs reaches the session.
    // Nothing of theirs is kept either: no scope can reach them again.
    server.runtime.retireGeneration(session.session_id, retired);
    server.ledger.retireBefore(session.session_id, session.generation);
    return { session_id: session.session_id, generation: session.generation };
  }),

  'session.close': defineMethod(paramsSchemas['session.close'], (p, { server, transport }) => {
    const s = server.sessions.authorize(p.session_id, transport);
    const interrupted = server.runtime.interruptSession(s.session_id).length;
    server.sessions.close(s.session_id, transport);
    server.logger.info({ session_id: s.session_id, transport, interrupted }, 'session closed');
    return { closed: true, interrupted };
  }),

  // A host that reconnects fills its gap: every kept event after last_seen, as the very envelopes
  // that were sent. Readable by an attached transport or with the session key (a host may replay
  // before it re-attaches); it attaches nothing.
  'session.events.since': defineMethod(paramsSchemas['session.events.since'], (p, { server, transport }) => {
    const s = server.sessions.authorizeRead(p.session_id, p.session_key, transport);
    const r = s.replay.since(p.last_seen ?? 0);
    const events = r.events.map((e) => e.text).join(',');
    return new JsonText(
      `{"events":[${events}],"latest_seq":${r.latest_seq},"truncated":${r.truncated},"count":${r.events.length},"epoch":${JSON.stringify(server.replay_epoch)},"open_requests":[]}`,
    );
  }),
};
