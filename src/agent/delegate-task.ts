// The model-facing `delegate_task` tool, in hermes' shape: `tasks: [{goal, context?}]` spawns
// children that run in the background; `action: "list" | "steer" | "stop"` with `subagent_id`
// and `message` controls them. Control reaches only the caller's own spawn tree, never counts
// against spawn limits, and every answer tells the model what to do next. Children's results come
// back to the caller's conversation as messages when they finish.
import { z } from 'zod';
import { ErrorCode, isSubrunError } from '../errors.ts';
import { MAX_STEER_BYTES, type InterruptResult, type SteerResult } from '../registry/registry.ts';
import type { Snapshot } from '../child/snapshot.ts';
import { defineTool, type Tool } from './tools/tool.ts';
import type { CompletionEntry, DelegationHandle } from '../types.ts';
import type { Revived } from '../delegation/recover.ts';

/** What the tool needs from whoever runs it: a child (through its context) or a session's parent. */
export interface DelegationPort {
  spawn(tasks: ReadonlyArray<{ goal: string; context?: string }>): DelegationHandle;
  list(): Snapshot[];
  steer(subagent_id: string, text: string): SteerResult;
  stop(subagent_id: string): InterruptResult;
  /** Continues a child a restart cut (docs/durability.md); absent where none can be revived. */
  revive?(subagent_id: string): Revived;
  readonly max_tasks: number;
}

const schema = z
  .strictObject({
    tasks: z
      .array(z.strictObject({ goal: z.string().trim().min(1), context: z.string().optional() }))
      .min(1)
      .optional()
      .describe('Spawn one subagent per task. They run in the background; each result arrives as a message when it finishes.'),
    action: z.enum(['list', 'steer', 'stop', 'revive']).optional().describe('Control your subagents instead of spawning.'),
    subagent_id: z.string().optional().describe('For steer, stop and revive: which subagent.'),
    message: z.string().optional().describe('For steer: the guidance to send.'),
  })
  .refine((a) => (a.tasks === undefined) !== (a.action === undefined), {
    message: 'give either tasks (to spawn) or action (list, steer, stop or revive), not both',
  });

/** Turns finished children into messages for the caller's conversation, in completion order. */
export class CompletionInbox {
  #ready: string[] = [];
  #live = 0;
  #wake: (() => void) | undefined;

  track(handle: DelegationHandle, goals: readonly string[]): void {
    this.#live += handle.subagent_ids.length;
    handle.each.forEach((done, i) => {
      void done.then((entry) => {
        this.#live -= 1;
        this.#ready.push(completionMessage(entry, goals[i] ?? ''));
        this.#wake?.();
      });
    });
  }

  /** Messages ready now. */
  drain(): string[] {
    const out = this.#ready;
    this.#ready = [];
    return out;
  }

  /**
   * Ready messages, waiting for the next one if children are still running; null if none will
   * come. `steerArrived` (resolving when a steer is queued) ends the wait early, possibly with no
   * message: the caller goes on so that its next model call takes the steer.
   */
  async next(signal: AbortSignal, steerArrived?: (cancel: AbortSignal) => Promise<void>): Promise<string[] | null> {
    if (this.#ready.length === 0 && this.#live === 0) return null;
    const cancel = new AbortController();
    let steered = false;
    void steerArrived?.(cancel.signal).then(() => {
      if (cancel.signal.aborted) return;
      steered = true;
      this.#wake?.();
    });
    try {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the steer callback sets it while the loop waits
      while (this.#ready.length === 0 && !signal.aborted && !steered) {
        await new Promise<void>((resolve) => {
          const done = () => {
            this.#wake = undefined;
            signal.removeEventListener('abort', done);
            resolve();
          };
          this.#wake = done;
          signal.addEventListener('abort', done, { once: true });
        });
      }
    } finally {
      cancel.abort();
    }
    return this.drain();
  }
}

export function completionMessage(e: CompletionEntry, goal: string): string {
  const lines = [`[subagent ${e.subagent_id} finished: ${e.status}] goal: ${goal}`];
  if (e.summary) lines.push(`result: ${e.summary}`);
  if (e.error) lines.push(`error: ${e.error}`);
  return lines.join('\n');
}

function describe(s: Snapshot): string {
  return `${s.subagent_id}  ${s.status}${s.accepting_steer ? '' : ' (no longer steerable)'}  depth=${s.depth} tools=${s.tool_count}${s.last_tool ? ` last=${s.last_tool}` : ''}  goal: ${s.goal}`;
}

export function delegateTaskTool(port: DelegationPort, inbox: CompletionInbox): Tool {
  return defineTool({
    name: 'delegate_task',
    description: [
      `Delegate work to subagents that run in parallel (at most ${port.max_tasks} tasks per call), or control the ones you started.`,
      'Spawn: {"tasks": [{"goal": "...", "context": "..."}]}. Each subagent starts fresh: put everything it needs in goal and context.',
      'Results arrive as messages when each subagent finishes; do not poll or spawn the same task again.',
      'Control: {"action": "list"} | {"action": "steer", "subagent_id": "...", "message": "..."} | {"action": "stop", "subagent_id": "..."}.',
      ...(port.revive
        ? ['A subagent whose result says exit_reason server_restart was cut by a restart: {"action": "revive", "subagent_id": "..."} continues it.']
        : []),
    ].join(' '),
    schema,
    handler(args) {
      if (args.tasks) {
        let handle: DelegationHandle;
        try {
          handle = port.spawn(args.tasks);
        } catch (err) {
          if (isSubrunError(err, ErrorCode.TooManyTasks)) {
            return `Refused: at most ${port.max_tasks} tasks per call, you sent ${args.tasks.length}. Split the work into batches of at most ${port.max_tasks} and call again.`;
          }
          if (isSubrunError(err, ErrorCode.DepthExceeded))
            return 'Refused: you are at the delegation depth limit and cannot spawn subagents. Do this work yourself.';
          if (isSubrunError(err, ErrorCode.SpawnPaused))
            return 'Refused: spawning is paused by the operator right now. Do the work yourself or finish without it.';
          throw err;
        }
        inbox.track(
          handle,
          args.tasks.map((t) => t.goal),
        );
        const ids = handle.subagent_ids.map((id, i) => `${id} (${args.tasks?.[i]?.goal ?? ''})`).join(', ');
        return `Started ${handle.subagent_ids.length} subagent(s): ${ids}. They run in the background; each one's result will arrive here as a message when it finishes. Do not poll and do not spawn the same task again. Use action "steer" to send one guidance or "stop" to end one.`;
      }
      switch (args.action) {
        case 'list': {
          const rows = port.list();
          return rows.length === 0 ? 'You have no subagents.' : rows.map(describe).join('\n');
        }
        case 'steer': {
          if (!args.subagent_id || !args.message?.trim()) return 'To steer, give subagent_id and a non-empty message.';
          const r = port.steer(args.subagent_id, args.message);
          if (r.status === 'queued') {
            return `Queued for ${args.subagent_id}. It will see your message at its next step; if it finishes first, your message comes back with its result. Do not send it again.`;
          }
          if (r.reason === 'not_found') return `No subagent ${args.subagent_id} in your delegation tree. Use action "list" to see yours.`;
          if (r.reason === 'too_long') return `Refused: the message is too long (at most ${MAX_STEER_BYTES} bytes). Shorten it.`;
          return `${args.subagent_id} is finishing or has finished, so it cannot take guidance now. Its result arrives as its completion message; do not retry the steer.`;
        }
        case 'stop': {
          if (!args.subagent_id) return 'To stop, give subagent_id.';
          const r = port.stop(args.subagent_id);
          if (r.found) {
            return `Stopping ${r.interrupted.join(', ')}. Their results (status interrupted) will arrive as completion messages.`;
          }
          return `${args.subagent_id} is not a running subagent of yours (unknown, already finished or already stopping). Use action "list" to see yours; a finished one's result arrives as its completion message.`;
        }
        case 'revive': {
          if (!args.subagent_id) return 'To revive, give subagent_id.';
          if (!port.revive) return "Reviving is not available here: only a session's parent can revive a subagent a restart cut.";
          let r: Revived;
          try {
            r = port.revive(args.subagent_id);
          } catch (err) {
            if (isSubrunError(err, ErrorCode.AlreadyRevived))
              return `${args.subagent_id} was revived already (${err.message}); its result arrives as a message.`;
            if (isSubrunError(err, ErrorCode.NotRevivable)) return `Cannot revive ${args.subagent_id}: ${err.message}.`;
            throw err;
          }
          inbox.track(r.handle, [`revival of ${r.revived_from}`]);
          return `Revived ${r.revived_from} as ${r.subagent_id}: it continues from its last checkpoint in the background${r.requeued.length > 0 ? `, with ${r.requeued.length} missed message(s) queued again` : ''}. Its result arrives as a message.`;
        }
        default:
          return 'Give either tasks or an action.';
      }
    },
  });
}
