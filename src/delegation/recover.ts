// After a restart: the children the last process lost, settled (each gets its one entry), and
// revived on request (docs/durability.md, "Start" and "Revive").
import { buildCompletionEntry } from './completion.ts';
import type { Core } from './core.ts';
import { ErrorCode, SubrunError } from '../errors.ts';
import type { ChildJournal, CompletionEntry, DelegationHandle, Owner, Scope, StoredChild, TaskSpec } from '../types.ts';
import { withProps } from '../shapes.ts';

/** Every lost child's error begins so (the contract's words). */
export const RESTART_ERROR = 'the server stopped while this subagent ran';
/** Exit reasons of a child a revival may continue. */
const REVIVABLE_REASONS: ReadonlySet<string> = new Set(['server_restart', 'worker_lost']);

/** A child the last process lost, as this start settled it. */
export interface SettledChild {
  readonly child: StoredChild;
  readonly entry: CompletionEntry;
  readonly steers_missed: number;
}

/** The last [text] line of a tail: what the lost child last said, its summary. */
function lastSaid(tail: string): string {
  const lines = tail.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i];
    if (line?.startsWith('[text] ')) return line.slice('[text] '.length);
  }
  return '';
}

/**
 * Settles every child the journal never saw finish (but those `adopted`), descendants first (the journal lists them
 * deepest first): status `error`, exit_reason `server_restart`, its undelivered steers missed
 * (`maybe_delivered` for those a model request had taken). Written before anything is served.
 */
export function settleLost(journal: ChildJournal, now: number, adopted?: ReadonlyMap<string, unknown>): SettledChild[] {
  const out: SettledChild[] = [];
  for (const child of journal.unfinished()) {
    // Still running elsewhere, and continued (adopt.ts).
    if (adopted?.has(child.subagent_id)) continue;
    const missed = child.steers.filter((s) => s.state !== 'delivered');
    const entry = buildCompletionEntry({
      task_index: child.task_index,
      subagent_id: child.subagent_id,
      status: 'error',
      exit_reason: 'server_restart',
      summary: lastSaid(child.tail),
      error: child.status === 'queued' ? `${RESTART_ERROR} (it had not started)` : RESTART_ERROR,
      duration_seconds: child.started_at === null ? 0 : (now - child.started_at) / 1000,
      model: child.model,
      missed: missed.map((s) => s.text),
      missed_detail: missed.map((s) => {
        const detail = { steer_id: s.steer_id, text: s.text, maybe_delivered: s.state === 'taken' };
        return s.requeued_from === undefined ? detail : withProps(detail, { requeued_from: s.requeued_from });
      }),
      revivable: child.agent !== 'object',
      ...(child.revived_from !== undefined ? { revived_from: child.revived_from } : {}),
    });
    journal.progress(child.subagent_id, `${child.tail}[error] ${entry.error ?? RESTART_ERROR}\n`, child.checkpoint);
    journal.finished(child.subagent_id, entry, now);
    out.push({ child, entry, steers_missed: missed.length });
  }
  journal.flush();
  return out;
}

export interface ReviveOptions {
  readonly text?: string;
  readonly requeue_missed?: boolean;
}

export interface Revived {
  readonly subagent_id: string;
  readonly revived_from: string;
  readonly requeued: ReadonlyArray<{ readonly steer_id: string; readonly requeued_from: string }>;
  readonly handle: DelegationHandle;
}

const notRevivable = (why: string) => new SubrunError(ErrorCode.NotRevivable, `not revivable: ${why}`);

/**
 * Starts a new child that continues a lost one from its last progress: same goal, agent, parent
 * id and depth, `revived_from` on its snapshot and entry; the missed steers queued again on request.
 */
export function revive(core: Core, scope: Scope | undefined, subagent_id: string, options: ReviveOptions, owner: Owner | undefined): Revived {
  const journal = core.journal;
  if (journal === undefined) throw notRevivable('this runtime keeps no store, so no child outlives its process');
  const child = journal.child(subagent_id);
  const o = child?.owner;
  if (!child || (scope && (o?.session_id !== scope.session_id || o.generation !== scope.generation))) throw notRevivable(`no subagent ${subagent_id} here`);
  if (child.revived_to !== undefined) {
    throw new SubrunError(ErrorCode.AlreadyRevived, `already revived as ${child.revived_to}`, [], { revived_as: child.revived_to });
  }
  const entry = child.entry;
  if (entry?.status !== 'error' || !REVIVABLE_REASONS.has(entry.exit_reason)) {
    throw notRevivable(entry ? `it ended ${entry.status} (${entry.exit_reason}), not cut by a restart or a lost worker` : 'it has not ended');
  }
  if (child.agent === 'object') throw notRevivable('its runner was an object of the process that ran it');
  const task: TaskSpec = {
    goal: child.goal,
    ...(child.context !== undefined ? { context: child.context } : {}),
    ...(child.agent !== 'default' ? { agent: child.agent.spec } : {}),
  };
  const note = `This run was cut by a server restart (${entry.exit_reason}) and continues from its last checkpoint.${options.text ? ` ${options.text}` : ''}`;
  const handle = core.spawn(null, [task], child.timeout_ms === undefined ? {} : { timeout_ms: child.timeout_ms }, owner, {
    revived_from: child.subagent_id,
    parent_id: child.parent_id,
    depth: child.depth,
    restored: { progress: child.checkpoint, note },
  });
  const revived_as = handle.subagent_ids[0] ?? '';
  journal.revived(child.subagent_id, revived_as);
  const requeued: Array<{ steer_id: string; requeued_from: string }> = [];
  if (options.requeue_missed !== false) {
    for (const m of entry.missed_steer_detail ?? []) {
      const r = core.registry.steer(revived_as, m.text, undefined, m.steer_id);
      if (r.status === 'queued') requeued.push({ steer_id: r.steer_id, requeued_from: m.steer_id });
    }
  }
  return { subagent_id: revived_as, revived_from: child.subagent_id, requeued, handle };
}
