// What a server is made with: its options, their defaults and bounds.
import type { Clock } from '../clock.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { Runner } from '../types.ts';
import { ErrorCode, SubrunError } from '../errors.ts';
import type { IdMaker } from '../ids.ts';
import type { Logger } from '../log.ts';
import { positiveInt, type RuntimeOptions } from '../delegation/runtime.ts';
import type { ServerStore } from '../store/types.ts';
import type { ParentFactory } from './context.ts';

/** Most elements one batch may have, by default (go-ethereum's rule too), and at most. */
export const DEFAULT_MAX_BATCH = 1000;
export const MAX_MAX_BATCH = 100_000;
/** Default bound of one message's replies: see docs/protocol.md (framing) for why 32 MiB. */
export const DEFAULT_MAX_REPLY_BYTES = 32 * 1024 * 1024;
/** The largest bound allowed: with every replaced reply added, still far under V8's string limit. */
export const MAX_MAX_REPLY_BYTES = 256 * 1024 * 1024;

/** An integer option within [min, max]. */
export function boundedInt(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const v = positiveInt(name, value, fallback, min);
  if (v > max)
    throw new SubrunError(ErrorCode.InvalidOptions, `${name} must be at most ${max}, got ${v}`, [{ path: name, message: `expected an integer <= ${max}` }]);
  return v;
}

export interface ServerOptions {
  /**
   * The server's Prometheus metrics (telemetry/metrics.ts): its registry is fed by the runtime
   * and read at scrape time. Absent: none are kept.
   */
  readonly metrics?: Metrics;
  readonly max_concurrent_children?: number;
  readonly max_spawn_depth?: number;
  /** Largest stdio line / WebSocket frame accepted. Default 1 MiB. */
  readonly max_message_bytes?: number;
  /** Most elements one batch may have (1 to 100,000). Default 1,000. */
  readonly max_batch?: number;
  /** Bytes one message's replies may take (1,024 to 256 MiB). Default 32 MiB. */
  readonly max_reply_bytes?: number;
  /** How long a session may stay parked (no transport attached) before it is closed. Default 15 min. */
  readonly park_ttl_ms?: number;
  /** Each session's replay ring: events kept (default 1,000) and bytes kept (default 1 MiB). */
  readonly replay_events?: number;
  readonly replay_bytes?: number;
  /**
   * hermes' authority model: whoever holds the server token owns every session, so a transport may
   * resume or activate any session without its key and replay any session's events. Default false:
   * the session key is the authority.
   */
  readonly single_user?: boolean;
  /** Where spawn trees are kept (`spawn_tree.*`); absent: none are kept and those methods say so. */
  readonly state_dir?: string;
  /** The working directory hosts are told about (session info `cwd`). Default process.cwd(). */
  readonly cwd?: string;
  readonly default_runner?: Runner;
  /**
   * Makes each session's parent agent (prompt.submit, session.steer). Absent: sessions have none,
   * and prompt.submit answers that no model is configured.
   */
  readonly parent?: ParentFactory;
  /** The model name hosts are told about (session info `model`). Default empty. */
  readonly model?: string;
  readonly runtime?: Omit<RuntimeOptions, 'max_concurrent_children' | 'max_spawn_depth' | 'clock' | 'ids' | 'logger' | 'default_runner' | 'store'>;
  /**
   * Where sessions, children, steers, events and kept answers outlive the process
   * (`SqliteStore.open(dir)`, docs/durability.md). Default: memory, nothing outlives it.
   */
  readonly store?: ServerStore;
  readonly clock?: Clock;
  readonly ids?: IdMaker;
  readonly logger?: Logger;
}
