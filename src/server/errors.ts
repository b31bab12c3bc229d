// Wire errors: numeric JSON-RPC codes. toRpcError() is the ONE place where anything thrown inside
// the server becomes a wire error; a stack never leaves the process.
import { z } from 'zod';
import { ErrorCode, isSubrunError, type Issue } from '../errors.ts';
import { StoreUnavailableError } from '../types.ts';
import { ParamCode, type CodedIssue } from '../contract/methods.ts';

export const RpcCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** Implementation-defined server error: the server is shutting down. */
  ShuttingDown: -32000,
  /** The same server-error code: the children's message bus (NATS) cannot be reached now. */
  NatsUnavailable: -32000,
  /**
   * Implementation-defined server error: this reply would take the message's replies past
   * max_reply_bytes. The call itself ran; only its reply was replaced.
   */
  ResponseTooLarge: -32001,
  /**
   * Implementation-defined server error: the store cannot write (disk full, read-only, corrupt);
   * the call changed nothing (or, with `data.maybe_applied`, its change stands once it can).
   */
  StoreUnavailable: -32002,
  IdRequired: ParamCode.IdRequired,
  NotOwned: 4001,
  TextRequired: ParamCode.TextRequired,
  TextTooLong: ParamCode.TextTooLong,
  DelegationNotFound: 4004,
  /** The child already holds as many undelivered steers as it may (count or bytes). */
  SteerQueueFull: 4005,
  /** HTTP only: a steer the caller's own child no longer accepts (finished or finishing). JSON-RPC answers `rejected`. */
  NotAcceptingSteer: 4006,
  SpawnPaused: 4011,
  TooManyTasks: 4012,
  /** prompt.submit while the session's parent turn is still running. */
  TurnRunning: 4013,
  /** prompt.submit on a server started without a model. */
  NoModel: 4014,
  /** The same idempotency key (same session and method) with different params. */
  IdempotencyConflict: 4015,
  /** subagent.revive of a child not cut by a restart or a lost worker (or whose runner cannot run again). */
  NotRevivable: 4016,
  /** subagent.revive of a child revived before (data.revived_as names the revival). */
  AlreadyRevived: 4017,
  /** spawn_tree.load of a path outside the spawn-trees root (hermes' code). */
  PathOutside: 4030,
  /** spawn_tree.* on a server that keeps no state (--no-state). */
  StateDisabled: 4031,
  /** Reading or writing the state directory failed (hermes' code). */
  StateFailed: 5000,
} as const;
export type RpcCode = (typeof RpcCode)[keyof typeof RpcCode];

export const NOT_OWNED_MESSAGE = 'session not found or not owned by this transport';

export class RpcError extends Error {
  override readonly name = 'RpcError';
  readonly code: number;
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.code = code;
    this.data = data;
  }

  toJSON(): { code: number; message: string; data?: unknown } {
    return this.data === undefined ? { code: this.code, message: this.message } : { code: this.code, message: this.message, data: this.data };
  }
}

export const notOwned = () => new RpcError(RpcCode.NotOwned, NOT_OWNED_MESSAGE);

export function invalidParams(issues: readonly Issue[]): RpcError {
  const first = issues[0];
  const message = first ? `invalid params: ${first.path || 'params'}: ${first.message}` : 'invalid params';
  return new RpcError(RpcCode.InvalidParams, message, { issues });
}

export function zodIssues(error: Pick<z.ZodError, 'issues'>): Issue[] {
  return error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
}

/** The coded check of a params schema (contract/methods.ts) behind an issue, if it is one. */
export function codedOf(issue: z.core.$ZodIssue): CodedIssue | undefined {
  if (issue.code !== 'custom') return undefined;
  const p: unknown = issue.params;
  if (typeof p !== 'object' || p === null || !('rpc_code' in p) || !('rank' in p)) return undefined;
  return typeof p.rpc_code === 'number' && typeof p.rank === 'number' ? { rpc_code: p.rpc_code, rank: p.rank } : undefined;
}

/**
 * A params schema's verdict in the protocol's order: a shape error (-32602, with every shape
 * issue) before any coded check, then the coded check of the lowest rank (4000 before 4002/4003).
 */
function paramsError(err: z.ZodError): RpcError {
  const shape = err.issues.filter((i) => codedOf(i) === undefined);
  if (shape.length > 0) return invalidParams(zodIssues({ issues: shape }));
  let first: { issue: z.core.$ZodIssue; coded: CodedIssue } | undefined;
  for (const issue of err.issues) {
    const coded = codedOf(issue);
    if (coded && (!first || coded.rank < first.coded.rank)) first = { issue, coded };
  }
  return first ? new RpcError(first.coded.rpc_code, first.issue.message) : invalidParams([]);
}

/** Converts anything thrown by a handler into the error the caller sees. */
export function toRpcError(err: unknown, log?: (err: unknown) => void): RpcError {
  if (err instanceof RpcError) return err;
  if (err instanceof z.ZodError) return paramsError(err);
  if (err instanceof StoreUnavailableError) return new RpcError(RpcCode.StoreUnavailable, 'store unavailable');
  if (isSubrunError(err)) {
    switch (err.code) {
      case ErrorCode.TasksRequired:
        return new RpcError(RpcCode.IdRequired, 'tasks required');
      case ErrorCode.TooManyTasks:
        return new RpcError(RpcCode.TooManyTasks, 'too many tasks', { detail: err.message });
      case ErrorCode.SpawnPaused:
        return new RpcError(RpcCode.SpawnPaused, 'spawning is paused');
      case ErrorCode.InvalidTasks:
      case ErrorCode.InvalidOptions:
        return invalidParams(err.issues.length > 0 ? err.issues : [{ path: '', message: err.message }]);
      case ErrorCode.RuntimeClosed:
        return new RpcError(RpcCode.ShuttingDown, 'server is shutting down');
      case ErrorCode.NoModel:
        return new RpcError(RpcCode.NoModel, err.message);
      case ErrorCode.TurnRunning:
        return new RpcError(RpcCode.TurnRunning, err.message);
      case ErrorCode.NotRevivable:
        return new RpcError(RpcCode.NotRevivable, err.message);
      case ErrorCode.AlreadyRevived:
        return new RpcError(RpcCode.AlreadyRevived, 'already revived', err.detail);
      case ErrorCode.StoreUnavailable:
        return new RpcError(RpcCode.StoreUnavailable, 'store unavailable');
      default:
        break;
    }
  }
  log?.(err);
  return new RpcError(RpcCode.InternalError, 'Internal error');
}
