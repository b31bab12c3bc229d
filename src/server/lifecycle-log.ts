// One info line per child lifecycle step, with ids only: never a goal, a text, a steer or a key.
import type { Owner } from '../types.ts';
import { isRecord } from '../guards.ts';
import type { Logger } from '../log.ts';
import { withProps } from '../shapes.ts';

export function logLifecycle(logger: Logger, event: Record<string, unknown> & { type: string }, owner: Owner | undefined): void {
  // Runs for every event: at the default level (warn) build nothing (bench/cases/fanout.ts).
  if (!logger.isLevelEnabled('info')) return;
  const ids = { subagent_id: event.subagent_id, parent_id: event.parent_id, session_id: owner?.session_id, generation: owner?.generation };
  switch (event.type) {
    case 'subagent.spawn_requested':
      logger.info(withProps(ids, { delegation_id: event.delegation_id, depth: event.depth }), 'child spawned');
      break;
    case 'subagent.start':
      logger.info(ids, 'child started');
      break;
    case 'subagent.steer.delivered':
      logger.info(withProps(ids, { steer_id: event.steer_id }), 'steer delivered');
      break;
    case 'subagent.complete': {
      const entry = isRecord(event.entry) ? event.entry : {};
      logger.info(withProps(ids, { status: entry.status, missed_steer: entry.missed_steer !== undefined }), 'child completed');
      break;
    }
    default:
      break;
  }
}
