// What the runtime tells telemetry, as it happens: one observer per runtime, called at the points
// where the runtime already publishes a fact (a child created, started, sealed; a steer queued,
// delivered, missed, rejected; an interrupt), and per child a RunTelemetry its runner reports
// model requests and tool calls to. Traces (traces.ts) and metrics (metrics.ts) are two observers;
// combine() joins them. Every method must be cheap and must never throw into the runtime.
import type { CompletionEntry, Ending, RunTelemetry, SteerRejection } from '../types.ts';
import { withProps } from '../shapes.ts';

export type { ChatEnd, ChatRequest, Ending, RunTelemetry } from '../types.ts';

/** A child as telemetry sees it: identity and placement, never content beyond the goal. */
export interface ChildFacts {
  readonly subagent_id: string;
  readonly parent_id: string | null;
  readonly depth: number;
  readonly delegation_id: string;
  readonly task_index: number;
  readonly goal: string;
  readonly model: string;
  readonly owner?: { readonly session_id: string } | undefined;
  /** Its runner; one that places its child (`place`) runs it on a worker (serve --nats). */
  readonly runner?: { readonly place?: unknown };
}

export interface DelegationFacts {
  readonly delegation_id: string;
  readonly task_count: number;
  /** The spawning child; null for a host's delegation. */
  readonly parent_id: string | null;
  readonly session_id: string | undefined;
}

/** A parent agent's turn (prompt.submit, ACP session/prompt), as telemetry sees it. */
export interface TurnFacts {
  readonly session_id: string;
  readonly turn_id: string;
  readonly model: string;
}

/** How a turn ended (its entry's counts, never its text). */
export interface TurnEnd {
  readonly status: string;
  readonly exit_reason: string;
  readonly api_calls: number;
  readonly tokens: { readonly input: number; readonly output: number };
}

/** A turn's model requests and tool calls (RunTelemetry), and its end. */
export interface TurnTelemetry extends RunTelemetry {
  end(result: TurnEnd): void;
}

export interface RuntimeObserver {
  delegated(d: DelegationFacts): void;
  created(c: ChildFacts): void;
  started(c: ChildFacts): void;
  /** The entry is sealed; its `missed_steer_detail` names the steers that missed. */
  finished(c: ChildFacts, entry: CompletionEntry): void;
  delegationDone(delegation_id: string, entries: readonly CompletionEntry[]): void;
  /** `at`: unix ms on the runtime's clock. */
  steerQueued(subagent_id: string, steer_id: string, bytes: number, at: number): void;
  steerDelivered(subagent_id: string, steer_id: string, at: number): void;
  /** A steer the runtime took back before anyone was told it was kept (a remote mailbox refused it). */
  steerWithdrawn(subagent_id: string, steer_id: string): void;
  steerRejected(subagent_id: string, reason: SteerRejection): void;
  /** `reached`: the target, then each descendant the interrupt stopped. */
  interrupted(target: string, found: boolean, reached: readonly string[]): void;
  run(c: ChildFacts): RunTelemetry;
  /** A parent agent's turn begins (its span parents on the request being handled). */
  turn(t: TurnFacts): TurnTelemetry;
}

const NOTHING: Ending<never> = { end() {} };
export const NO_RUN: RunTelemetry = {
  chat: () => NOTHING,
  tool: () => NOTHING,
  inject() {},
  spawnContext: () => undefined,
  placed() {},
};
export const NO_TURN: TurnTelemetry = { ...NO_RUN, end() {} };

/** An observer that does nothing (a runtime without telemetry). */
export const NO_OBSERVER: RuntimeObserver = {
  delegated() {},
  created() {},
  started() {},
  finished() {},
  delegationDone() {},
  steerQueued() {},
  steerDelivered() {},
  steerWithdrawn() {},
  steerRejected() {},
  interrupted() {},
  run: () => NO_RUN,
  turn: () => NO_TURN,
};

function both<T>(a: Ending<T>, b: Ending<T>): Ending<T> {
  return {
    end(result) {
      a.end(result);
      b.end(result);
    },
  };
}

/** Both observers, `a` first. */
export function combine(a: RuntimeObserver, b: RuntimeObserver): RuntimeObserver {
  return {
    delegated: (d) => {
      a.delegated(d);
      b.delegated(d);
    },
    created: (c) => {
      a.created(c);
      b.created(c);
    },
    started: (c) => {
      a.started(c);
      b.started(c);
    },
    finished: (c, e) => {
      a.finished(c, e);
      b.finished(c, e);
    },
    delegationDone: (id, es) => {
      a.delegationDone(id, es);
      b.delegationDone(id, es);
    },
    steerQueued: (c, s, n, t) => {
      a.steerQueued(c, s, n, t);
      b.steerQueued(c, s, n, t);
    },
    steerDelivered: (c, s, t) => {
      a.steerDelivered(c, s, t);
      b.steerDelivered(c, s, t);
    },
    steerWithdrawn: (c, s) => {
      a.steerWithdrawn(c, s);
      b.steerWithdrawn(c, s);
    },
    steerRejected: (c, r) => {
      a.steerRejected(c, r);
      b.steerRejected(c, r);
    },
    interrupted: (t, f, r) => {
      a.interrupted(t, f, r);
      b.interrupted(t, f, r);
    },
    run: (c) => bothRuns(a.run(c), b.run(c)),
    turn(t) {
      const ta = a.turn(t);
      const tb = b.turn(t);
      return withProps(bothRuns(ta, tb), {
        end(r) {
          ta.end(r);
          tb.end(r);
        },
      } satisfies Pick<TurnTelemetry, 'end'>);
    },
  };
}

function bothRuns(ra: RunTelemetry, rb: RunTelemetry): RunTelemetry {
  return {
    chat: (r) => both(ra.chat(r), rb.chat(r)),
    tool: (n, id) => both(ra.tool(n, id), rb.tool(n, id)),
    inject: (carrier) => {
      ra.inject(carrier);
      rb.inject(carrier);
    },
    spawnContext: () => ra.spawnContext() ?? rb.spawnContext(),
    placed: (worker, provider) => {
      ra.placed(worker, provider);
      rb.placed(worker, provider);
    },
  };
}
