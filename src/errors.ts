// Local errors: string codes inside the process. The RPC layer converts them to wire errors in
// one place (src/rpc/errors.ts); nothing here knows JSON-RPC numbers.

/** What a server without a model answers a prompt (the parent agent and the server say the same). */
export const NO_MODEL_MESSAGE = 'no model configured: start the server with --base-url and --model';

export const ErrorCode = {
  TasksRequired: 'tasks_required',
  InvalidTasks: 'invalid_tasks',
  TooManyTasks: 'too_many_tasks',
  DepthExceeded: 'depth_exceeded',
  SpawnPaused: 'spawn_paused',
  InvalidOptions: 'invalid_options',
  RuntimeClosed: 'runtime_closed',
  /** A parent agent asked to run on a server started without a model. */
  NoModel: 'no_model',
  /** A parent agent asked for a turn while its last one still runs. */
  TurnRunning: 'turn_running',
  /** subagent.revive of a child that did not end by a restart or a lost worker (or cannot run again). */
  NotRevivable: 'not_revivable',
  /** subagent.revive of a child revived before. */
  AlreadyRevived: 'already_revived',
  /** The store cannot write: nothing was acknowledged. */
  StoreUnavailable: 'store_unavailable',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export interface Issue {
  /** Dotted path of the offending field, e.g. `tasks.1.goal`. */
  readonly path: string;
  readonly message: string;
}

export class SubrunError extends Error {
  override readonly name = 'SubrunError';
  readonly code: ErrorCode;
  readonly issues: readonly Issue[];
  /** Facts beside the message a surface may pass on (e.g. `revived_as` of `already_revived`). */
  readonly detail: Readonly<Record<string, string>> | undefined;

  constructor(code: ErrorCode, message: string, issues: readonly Issue[] = [], detail?: Readonly<Record<string, string>>) {
    super(message);
    this.code = code;
    this.issues = issues;
    this.detail = detail;
  }
}

export function isSubrunError(err: unknown, code?: ErrorCode): err is SubrunError {
  return err instanceof SubrunError && (code === undefined || err.code === code);
}
