// The session's parent agent over the wire: prompt.submit runs one turn in the background,
// session.steer guides the running turn, session.interrupt stops it and the session's children.
import { ErrorCode, NO_MODEL_MESSAGE, SubrunError } from '../../errors.ts';
import { defineMethod } from './define.ts';
import { RpcCode, RpcError } from '../errors.ts';

export const parentMethods = {
  'prompt.submit': defineMethod(
    'prompt.submit',
    (p, server, transport) => {
      const s = server.sessions.authorize(p.session_id, transport);
      if (server.draining) throw new RpcError(RpcCode.ShuttingDown, 'server is shutting down');
      const parent = server.parents.of(s.session_id);
      if (!parent) throw new SubrunError(ErrorCode.NoModel, NO_MODEL_MESSAGE);
      return parent.submit(p.text);
    },
    { writes: true },
  ),

  'session.steer': defineMethod('session.steer', (p, server, transport) => {
    const s = server.sessions.authorize(p.session_id, transport);
    // No parent agent: no turn runs, so the steer would strand (as when the agent is idle).
    const answer = server.parents.of(s.session_id)?.steer(p.text) ?? { status: 'rejected' as const, text: p.text };
    return { session_id: s.session_id, ...answer };
  }),

  'session.interrupt': defineMethod(
    'session.interrupt',
    (p, server, transport) => {
      const s = server.sessions.authorize(p.session_id, transport);
      // Only a session that has a parent agent can have a turn to stop: none is made for this.
      const turn = server.parents.peek(s.session_id)?.interrupt() ?? false;
      const stopped = server.runtime.interruptSession(s.session_id, s.generation);
      const interrupted = turn || stopped.length > 0;
      return {
        session_id: s.session_id,
        status: interrupted ? ('interrupted' as const) : ('not_interrupted' as const),
        interrupted,
        turn_interrupted: turn,
        stopped,
      };
    },
    { writes: true },
  ),
} as const;
