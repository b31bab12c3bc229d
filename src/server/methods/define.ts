// One entry of the typed method table: the method's schema validates its params once (answering
// subrun's own codes), the handler gets the inferred params and answers the method's result type.
import type { Immutable } from '../../contract/entities.ts';
import { paramsSchemas, type MethodName, type ParamsOf, type ResultOf as WireResultOf } from '../../contract/methods.ts';
import type { CallContext, Services } from '../context.ts';
import type { z } from 'zod';
import { codedOf, invalidParams, RpcCode, RpcError } from '../errors.ts';
import { nestsDeeperThan } from '../../guards.ts';
import { isThenable, type Keyed } from '../idempotency.ts';
import { JsonText } from '../json-text.ts';
import { withProps } from '../../shapes.ts';

/** A method's result as a handler may build it (read-only views of the runtime's objects welcome). */
export type ResultOf<M extends MethodName> = Immutable<WireResultOf<M>>;

/** A steer's answer; a refusal says why (`reason`), as in-process (HTTP maps it to its status codes). */
export type SteerAnswer = ResultOf<'subagent.steer'>;

/** What a handler answers: the wire's result (the table keeps the name for a surface that needs more). */
export type HandledOf<M extends MethodName> = ResultOf<M>;

type Answer<T> = T | JsonText<T> | Promise<T | JsonText<T>>;
/** What a handler may answer: its result, the same already serialised, or a promise of it. */
export type AnswerOf<M extends MethodName> = Answer<HandledOf<M>>;
/** An answer once it is there: the value, or its text. */
export type SettledOf<M extends MethodName> = HandledOf<M> | JsonText<HandledOf<M>>;

/** Waits for an answer that may be a promise (a steer to a remote child answers once committed). */
export async function settle<M extends MethodName>(answer: AnswerOf<M>): Promise<SettledOf<M>> {
  return await answer;
}

/** What JSON-RPC sends. */
export type WireAnswerOf<M extends MethodName> = Answer<ResultOf<M>>;

export type Handler<M extends MethodName> = (params: ParamsOf<M>, services: Services, transport: string) => AnswerOf<M>;

export interface MethodDef<M extends MethodName = MethodName> {
  readonly name: M;
  /** Whether the method honours `idempotency_key`. */
  readonly idempotent: boolean;
  /** The params as the handler gets them; throws the schema's ZodError (toRpcError maps its codes). */
  parse(params: Record<string, unknown>): ParamsOf<M>;
  /** Runs the call with the replay flag apart (HTTP says it in a header, not in the body). */
  run(params: Record<string, unknown>, ctx: CallContext): Keyed<AnswerOf<M>>;
  /** Runs the call as JSON-RPC answers it: the wire's shape; a replay carries `idempotent_replay: true`. */
  call(params: Record<string, unknown>, ctx: CallContext): WireAnswerOf<M>;
}

export interface MethodOptions<M extends MethodName> {
  /** A cheap check, true only when the schema would give the handler the same object: spares the copy on the calls hosts poll. */
  readonly accepts?: (params: Record<string, unknown>) => params is ParamsOf<M>;
  /** Honours `idempotency_key`: a repeated key replays the first answer (idempotency.ts). */
  readonly idempotent?: boolean;
  /**
   * Changes what the store keeps: refused with -32002 while the store cannot write, and answered
   * only once its writes are committed. Reads keep working from memory meanwhile.
   */
  readonly writes?: boolean;
}

/** Deeper than any params a method takes (a spawn tree of scripted children inside steps, many levels down). */
export const MAX_PARAMS_DEPTH = 256;

/** `{...result, idempotent_replay: true}`: how JSON-RPC marks a replayed answer. */
export function markReplay<T>(value: T): T {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.assign({}, value, { idempotent_replay: true }) : value;
}

export function defineMethod<M extends MethodName>(name: M, handle: Handler<M>, options: MethodOptions<M> = {}): MethodDef<M> {
  const schema = paramsSchemas[name];
  const { accepts, idempotent = false, writes = false } = options;
  const parse = (params: Record<string, unknown>): ParamsOf<M> => {
    if (accepts?.(params) === true) return params;
    // The table's schema for M: TypeScript cannot correlate the indexed access with ParamsOf<M>.
    return schema.parse(params) as ParamsOf<M>;
  };
  const run = (params: Record<string, unknown>, ctx: CallContext): Keyed<AnswerOf<M>> => {
    // Before anything walks them recursively (the schema, an idempotency key's digest, a kept
    // answer): a hostile nesting is a shape error, never a stack overflow (-32603).
    if (nestsDeeperThan(params, MAX_PARAMS_DEPTH)) throw invalidParams([{ path: 'params', message: `nested more than ${MAX_PARAMS_DEPTH} levels deep` }]);
    if (writes && !ctx.services.store.available) throw storeUnavailable(false);
    let keyed: Keyed<AnswerOf<M>> | undefined;
    try {
      keyed = runKeyed(params, ctx);
    } finally {
      // Answered only once persisted: what the call wrote, its kept answer, the events it sent.
      if (keyed === undefined) commitQuietly(ctx.services);
    }
    return committed(keyed, ctx.services, writes);
  };
  const runKeyed = (params: Record<string, unknown>, ctx: CallContext): Keyed<AnswerOf<M>> => {
    const { services, transport } = ctx;
    const key = idempotent ? keyOf(params) : undefined;
    if (key === undefined) return { value: handle(parse(params), services, transport), replayed: false };
    // A keyed call: a shape error (-32602) is answered at once, never kept; a coded check (4000,
    // 4002/4003) is the method's own answer, kept and replayed like any error the handler throws.
    const checked = accepts?.(params) === true ? { success: true as const, data: params } : schema.safeParse(params);
    if (!checked.success && !allCoded(checked.error)) throw checked.error;
    const once = (): AnswerOf<M> => {
      if (!checked.success) throw checked.error;
      // The table's schema for M, as in parse().
      return handle(checked.data as ParamsOf<M>, services, transport);
    };
    // Checked against the session as the method itself would check it: a caller that may not use
    // the session gets the method's own error, in its own order (never another caller's answer).
    let session_id: string;
    try {
      session_id = services.sessions.authorize(sessionOf(params), transport).session_id;
    } catch {
      return { value: once(), replayed: false };
    }
    // The raw params are what a repeat must match (the parsed ones are trimmed).
    return services.idempotency.run(session_id, name, key, params, once, (err) => services.logger.error({ err, method: name }, 'method failed'));
  };
  // Most methods answer the wire's shape as they are: JSON-RPC calls them straight (bench/cases/rpc-stdio.ts).
  const direct = (params: Record<string, unknown>, ctx: CallContext): WireAnswerOf<M> => {
    if (!ctx.services.store.durable) return handle(parse(params), ctx.services, ctx.transport);
    return run(params, ctx).value;
  };
  return { name, idempotent, parse, run, call: idempotent ? (params, ctx) => toWire(run(params, ctx)) : direct };
}

/** -32002: the store cannot write. `maybe`: the call ran, and its change stands once the store can write again. */
function storeUnavailable(maybe: boolean): RpcError {
  return new RpcError(RpcCode.StoreUnavailable, 'store unavailable', maybe ? { maybe_applied: true } : undefined);
}

function commitQuietly(services: Services): void {
  try {
    services.store.flush();
  } catch {
    // the call's own error is the answer; what it queued is written when the store can write again
  }
}

/**
 * Commits what the call queued before its answer goes out; a write whose commit fails answers
 * -32002. With a store durable beyond its local commit (JetStream), the answer goes once stored there.
 */
function committed<M extends MethodName>(keyed: Keyed<AnswerOf<M>>, services: Services, writes: boolean): Keyed<AnswerOf<M>> {
  if (!writes) commitQuietly(services);
  else {
    try {
      services.store.flush();
    } catch {
      throw storeUnavailable(true);
    }
  }
  const { value } = keyed;
  // A promise answer (a steer to a remote worker) is committed as it settles, before any
  // caller's continuation writes the answer out.
  if (isThenable(value)) {
    const answered = Promise.resolve(value).then(
      async (v) => {
        commitQuietly(services);
        await durable(services, writes);
        return v;
      },
      async (err: unknown) => {
        commitQuietly(services);
        await durable(services, false);
        throw err;
      },
    );
    return withProps(keyed, { value: answered });
  }
  const stored = services.store.settled();
  if (stored === undefined) return keyed;
  return withProps(keyed, { value: stored.then(() => value, unstored(writes, value)) });
}

/** Waits until the store holds what is committed: a write whose storing fails answers -32002. */
async function durable(services: Services, writes: boolean): Promise<void> {
  await services.store.settled()?.catch(unstored(writes, undefined));
}

function unstored<T>(writes: boolean, value: T): () => T {
  return () => {
    if (writes) throw storeUnavailable(true);
    return value;
  };
}

/** True when every issue is a coded check of contract/methods.ts (none is a shape error). */
function allCoded(error: z.ZodError): boolean {
  return error.issues.every((i) => codedOf(i) !== undefined);
}

function keyOf(params: object): string | undefined {
  const key: unknown = 'idempotency_key' in params ? params.idempotency_key : undefined;
  return typeof key === 'string' ? key : undefined;
}

function sessionOf(params: object): unknown {
  return 'session_id' in params ? params.session_id : undefined;
}

/** JSON-RPC's view of an answer: a replay marked once it settles. */
export function toWire<M extends MethodName>(keyed: Keyed<AnswerOf<M>>): WireAnswerOf<M> {
  const shape = (v: HandledOf<M>): ResultOf<M> => (keyed.replayed ? markReplay(v) : v);
  const { value } = keyed;
  // Text already serialised (a read's answer, waiting for the store) goes as it is.
  if (isThenable(value)) return Promise.resolve(value).then((v) => (v instanceof JsonText ? v : shape(v)));
  if (!keyed.replayed || value instanceof JsonText) return value;
  return shape(value);
}
