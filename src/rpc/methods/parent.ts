// The session's parent agent over the wire: prompt.submit runs one turn in the background,
// session.steer guides the running turn, session.interrupt stops it and the session's children.
import { defineMethod, type MethodDef } from '../context.ts';
import { paramsSchemas } from '../../contract/wire.ts';
import { requireSteerText } from './checks.ts';
import { RpcCode, RpcError } from '../errors.ts';

export const parentMethods: Record<string, MethodDef> = {
  'prompt.submit': defineMethod(paramsSchemas['prompt.submit'], (p, { server, transport }) => {
    const text = typeof p.text === 'string' ? p.text.trim() : '';
    if (text === '') throw new RpcError(RpcCode.TextRequired, 'text is required');
    const s = server.sessions.authorize(p.session_id, transport);
    if (server.draining) throw new RpcError(RpcCode.ShuttingDown, 'server is shutting down');
    return server.parentOf(s.session_id).submit(text);
  }),

  'session.steer': defineMethod(paramsSchemas['session.steer'], (p, { server, transport }) => {
    const text = requireSteerText(p.text);
    const s = server.sessions.authorize(p.session_id, transport);
    return { session_id: s.session_id, ...server.parentOf(s.session_id).steer(text) };
  }),

  'session.interrupt': defineMethod(paramsSchemas['session.interrupt'], (p, { server, transport }) => {
    const s = server.sessions.authorize(p.session_id, transport);
    // Only a session that has a parent agent can have a turn to stop: none is made for this.
    const turn = server.peekParent(s.session_id)?.interrupt() ?? false;
    const stopped = server.runtime.interruptSession(s.session_id, s.generation);
    const interrupted = turn || stopped.length > 0;
    return { session_id: s.session_id, status: interrupted ? 'interrupted' : 'not_interrupted', interrupted, turn_interrupted: turn, stopped };
  }),
};
