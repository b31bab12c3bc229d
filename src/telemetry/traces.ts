// The OpenTelemetry side of the runtime, through @opentelemetry/api only: `subrun.delegation` per
// delegate call, `invoke_agent` per child (created -> entry sealed), `chat {model}` per model
// request and `execute_tool {name}` per tool call, with the GenAI conventions' names. Every span
// is started with an explicit parent kept here (a child's delegation, a spawn's child or tool
// span), so the tree is the subagent tree across p-queue, timers and NATS, with or without a
// context manager. No content is ever recorded: the goal alone, cut to 120 characters.
import { INVALID_SPAN_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import type { CompletionEntry } from '../types.ts';
import { ambient, held, inject, requestSpan, tracer, tracing } from './context.ts';
import { NO_RUN, NO_TURN } from './observer.ts';
import type {
  ChatEnd,
  ChatRequest,
  ChildFacts,
  DelegationFacts,
  Ending,
  RunTelemetry,
  RuntimeObserver,
  TurnEnd,
  TurnFacts,
  TurnTelemetry,
} from './observer.ts';
import { withProps } from '../shapes.ts';

export const GOAL_CHARS = 120;
const FAILED = new Set(['failed', 'error', 'timeout']);

/** A span and the context its children start under (made on first use: most spans have none). */
class Open {
  readonly span: Span;
  readonly #parent: Context;
  #ctx: Context | undefined;

  constructor(span: Span, parent: Context) {
    this.span = span;
    this.#parent = parent;
  }

  get ctx(): Context {
    return (this.#ctx ??= trace.setSpan(this.#parent, this.span));
  }
}

class ChildSpan extends Open {
  /** Tool spans open now, innermost last: a spawn from inside a tool hangs under it. */
  readonly tools: Open[] = [];
  /**
   * Runs on a worker: its model requests and tool calls are the worker's spans (under this one),
   * so the control plane makes none for the tool steps it relays.
   */
  readonly remote: boolean;

  constructor(span: Span, parent: Context, remote: boolean) {
    super(span, parent);
    this.remote = remote;
  }
}

const NOTHING: Ending<never> = { end() {} };

function start(name: string, kind: SpanKind, attributes: Attributes, parent: Context): Span {
  return tracer.startSpan(name, { kind, attributes }, parent);
}

function open(name: string, kind: SpanKind, attributes: Attributes, parent: Context): Open {
  return new Open(start(name, kind, attributes, parent), parent);
}

/** The runtime's spans. One per runtime; state only for live children and open delegations. */
export class Traces implements RuntimeObserver {
  readonly #children = new Map<string, ChildSpan>();
  readonly #delegations = new Map<string, Open>();
  /** Queued steers' acceptance time (ms), for the delivered event's wait. */
  readonly #steers = new Map<string, number>();

  delegated(d: DelegationFacts): void {
    if (!tracing()) return;
    const parentChild = d.parent_id === null ? undefined : this.#children.get(d.parent_id);
    // A remote child's spawn hangs under the span its worker named (its tool call), when it named one.
    const parent = parentChild ? ((parentChild.remote ? held() : undefined) ?? parentChild.tools.at(-1)?.ctx ?? parentChild.ctx) : ambient();
    const attributes: Attributes = { 'subrun.delegation.id': d.delegation_id, 'subrun.delegation.task_count': d.task_count };
    if (d.session_id !== undefined) attributes['gen_ai.conversation.id'] = d.session_id;
    if (d.parent_id !== null) attributes['subrun.parent.id'] = d.parent_id;
    this.#delegations.set(d.delegation_id, open('subrun.delegation', SpanKind.INTERNAL, attributes, parent));
  }

  created(c: ChildFacts): void {
    if (!tracing()) return;
    const parent = this.#delegations.get(c.delegation_id)?.ctx ?? ambient();
    const attributes: Attributes = {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'subrun',
      'gen_ai.agent.id': c.subagent_id,
      'gen_ai.request.model': c.model,
      'subrun.depth': c.depth,
      'subrun.delegation.id': c.delegation_id,
      'subrun.task_index': c.task_index,
      'subrun.goal': c.goal.length > GOAL_CHARS ? c.goal.slice(0, GOAL_CHARS) : c.goal,
      'subrun.remote': c.runner?.place !== undefined,
    };
    if (c.owner !== undefined) attributes['gen_ai.conversation.id'] = c.owner.session_id;
    if (c.parent_id !== null) attributes['subrun.parent.id'] = c.parent_id;
    const remote = c.runner?.place !== undefined;
    this.#children.set(c.subagent_id, new ChildSpan(start('invoke_agent', SpanKind.INTERNAL, attributes, parent), parent, remote));
  }

  started(c: ChildFacts): void {
    this.#children.get(c.subagent_id)?.span.addEvent('subrun.started');
  }

  finished(c: ChildFacts, entry: CompletionEntry): void {
    const child = this.#children.get(c.subagent_id);
    if (!child) return;
    this.#children.delete(c.subagent_id);
    const { span } = child;
    // In acceptance order, at the seal: the entry lists them so.
    for (const m of entry.missed_steer_detail ?? []) {
      this.#steers.delete(m.steer_id);
      span.addEvent('subrun.steer.missed', { 'subrun.steer.id': m.steer_id, 'subrun.steer.maybe_delivered': m.maybe_delivered });
    }
    for (const t of child.tools) t.span.end();
    sealed(span, entry, { 'subrun.tool_count': entry.tool_trace.length });
  }

  delegationDone(delegation_id: string, entries: readonly CompletionEntry[]): void {
    const d = this.#delegations.get(delegation_id);
    if (!d) return;
    this.#delegations.delete(delegation_id);
    if (entries.some((e) => FAILED.has(e.status))) d.span.setStatus({ code: SpanStatusCode.ERROR });
    d.span.end();
  }

  steerQueued(subagent_id: string, steer_id: string, bytes: number, at: number): void {
    if (!tracing()) return;
    requestSpan()?.setAttributes({ 'subrun.steer.fate': 'queued', 'subrun.steer.id': steer_id });
    const child = this.#children.get(subagent_id);
    // A span nobody records (no SDK, or sampled out) keeps no wait to measure: the queued steers of
    // a busy child would fill the map for nothing (bench: http.steer).
    if (!child?.span.isRecording()) return;
    this.#steers.set(steer_id, at);
    child.span.addEvent('subrun.steer.queued', { 'subrun.steer.id': steer_id, 'subrun.steer.bytes': bytes });
  }

  steerDelivered(subagent_id: string, steer_id: string, at: number): void {
    const queued = this.#steers.get(steer_id);
    this.#steers.delete(steer_id);
    const attributes: Attributes = { 'subrun.steer.id': steer_id };
    if (queued !== undefined) attributes['subrun.steer.wait_ms'] = Math.max(0, at - queued);
    this.#children.get(subagent_id)?.span.addEvent('subrun.steer.delivered', attributes);
  }

  steerWithdrawn(_subagent_id: string, steer_id: string): void {
    this.#steers.delete(steer_id);
  }

  steerRejected(): void {
    requestSpan()?.setAttribute('subrun.steer.fate', 'rejected');
  }

  interrupted(target: string, found: boolean, reached: readonly string[]): void {
    requestSpan()?.setAttributes({ 'subrun.interrupt.found': found, 'subrun.interrupt.count': reached.length });
    for (const id of reached) this.#children.get(id)?.span.addEvent('subrun.interrupt', { 'subrun.interrupt.target': target });
  }

  run(c: ChildFacts): RunTelemetry {
    return this.#children.has(c.subagent_id) ? runOf(() => this.#children.get(c.subagent_id)) : NO_RUN;
  }

  /**
   * A parent agent's turn: `invoke_agent` with `gen_ai.agent.name=parent`, under the request being
   * handled (prompt.submit); its model requests, tool calls and delegations hang under it.
   */
  turn(t: TurnFacts): TurnTelemetry {
    if (!tracing()) return NO_TURN;
    const attributes: Attributes = {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'openai',
      'gen_ai.agent.name': 'parent',
      'gen_ai.conversation.id': t.session_id,
      'gen_ai.request.model': t.model,
      'subrun.turn.id': t.turn_id,
    };
    const parent = ambient();
    const turn = new ChildSpan(start('invoke_agent', SpanKind.INTERNAL, attributes, parent), parent, false);
    let ended = false;
    return withProps(
      runOf(() => turn),
      {
        end(r) {
          if (ended) return;
          ended = true;
          for (const tool of turn.tools) tool.span.end();
          sealed(turn.span, r);
        },
      } satisfies Pick<TurnTelemetry, 'end'>,
    );
  }

  /** A child's span that is not this runtime's: a worker's runner parents on the context its assignment carried. */
  static runUnder(ctx: Context): RunTelemetry {
    // Its context is the one given: setSpan of the span it holds changes nothing in it.
    const child = new ChildSpan(trace.getSpan(ctx) ?? trace.wrapSpanContext(INVALID_SPAN_CONTEXT), ctx, false);
    return runOf(() => child);
  }
}

/** The end of an `invoke_agent` span: its counts, ERROR for failed, error and timeout. */
function sealed(span: Span, end: TurnEnd, extra?: Attributes): void {
  span.setAttributes({
    'subrun.status': end.status,
    'subrun.exit_reason': end.exit_reason,
    'subrun.api_calls': end.api_calls,
    'gen_ai.usage.input_tokens': end.tokens.input,
    'gen_ai.usage.output_tokens': end.tokens.output,
    ...extra,
  });
  if (FAILED.has(end.status)) {
    span.setAttribute('error.type', end.status);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

function runOf(child: () => ChildSpan | undefined): RunTelemetry {
  return {
    chat: (request) => chatSpan(child(), request),
    tool(name, call_id) {
      const c = child();
      if (!c || c.remote) return NOTHING;
      const attributes: Attributes = { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name, 'gen_ai.tool.type': 'function' };
      if (call_id !== undefined && call_id !== '') attributes['gen_ai.tool.call.id'] = call_id;
      const t = open(`execute_tool ${name}`, SpanKind.INTERNAL, attributes, c.ctx);
      c.tools.push(t);
      let ended = false;
      return {
        end(ok) {
          if (ended) return;
          ended = true;
          const i = c.tools.indexOf(t);
          if (i >= 0) c.tools.splice(i, 1);
          if (!ok) {
            t.span.setAttribute('error.type', 'tool_error');
            t.span.setStatus({ code: SpanStatusCode.ERROR });
          }
          t.span.end();
        },
      };
    },
    inject(carrier) {
      const c = child();
      if (c) inject(c.tools.at(-1)?.ctx ?? c.ctx, carrier);
    },
    spawnContext() {
      const c = child();
      return c ? (c.tools.at(-1)?.ctx ?? c.ctx) : undefined;
    },
    placed(worker, provider) {
      child()?.span.setAttributes({ 'subrun.worker.id': worker, 'gen_ai.provider.name': provider });
    },
  };
}

function chatSpan(child: ChildSpan | undefined, request: ChatRequest): Ending<ChatEnd> {
  if (!child || child.remote) return NOTHING;
  const attributes: Attributes = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': request.model };
  try {
    const url = new URL(request.base_url);
    attributes['server.address'] = url.hostname;
    attributes['server.port'] = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  } catch {
    // A base URL the request itself would refuse: the span names no server.
  }
  // The child's own span says who it talks to once it talks to a model.
  child.span.setAttribute('gen_ai.provider.name', 'openai');
  const span = start(`chat ${request.model}`, SpanKind.CLIENT, attributes, child.ctx);
  return {
    end(r) {
      if (r.outcome === 'ok') {
        span.setAttributes({
          'gen_ai.usage.input_tokens': r.input_tokens,
          'gen_ai.usage.output_tokens': r.output_tokens,
          'gen_ai.response.finish_reasons': r.finish_reason === null ? [] : [r.finish_reason],
        });
        if (r.response_model !== undefined) span.setAttribute('gen_ai.response.model', r.response_model);
        if (r.response_id !== undefined) span.setAttribute('gen_ai.response.id', r.response_id);
      } else if (r.outcome === 'cancelled') span.setAttribute('subrun.cancelled', true);
      else {
        span.setAttribute('error.type', r.error_type);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}
