// The public view of a child: an allow-list of fields, built fresh on every call, so private
// state (owner, runner, inbox) cannot leak into a reply or an event by accident.
import type { Snapshot } from '../contract/wire.ts';
import type { ChildRecord } from './record.ts';
import { withProps } from '../shapes.ts';

export type { Snapshot };

export function toSnapshot(r: ChildRecord): Snapshot {
  const snap: Snapshot = {
    subagent_id: r.subagent_id,
    parent_id: r.parent_id,
    depth: r.depth,
    goal: r.goal,
    delegation_id: r.delegation_id,
    model: r.model,
    started_at: r.started_at === null ? null : r.started_at / 1000,
    status: r.status,
    tool_count: r.tool_count,
    last_tool: r.last_tool,
    accepting_steer: r.accepting_steer,
  };
  const revived = r.revived_from === undefined ? snap : withProps(snap, { revived_from: r.revived_from });
  return r.finished_at === null ? revived : withProps(revived, { finished_at: r.finished_at / 1000 });
}
