// A session's parent agent: a model-driven agent that a host talks to with prompt.submit, steers
// with session.steer and stops with session.interrupt. It delegates through the delegate_task
// tool; its children are the session's first-level children, and its control actions reach only
// the ones it spawned (and their descendants). One turn at a time; the conversation carries over
// from turn to turn until the session is reset.
import { SteerInbox } from '../child/steering.ts';
import { runAgentLoop } from './agent-loop.ts';
import type { ChatMessage } from './chat.ts';
import { CompletionInbox, delegateTaskTool, type DelegationPort } from './delegate-task.ts';
import { DEFAULT_MAX_ITERATIONS, OPENAI_AGENT, openaiRunner, type OpenAIRunnerConfig } from './runner.ts';
import { STEER_PROMPT } from './steer-marker.ts';
import { buildCompletionEntry } from '../delegation/completion.ts';
import { preview } from '../child/preview.ts';
import type { Owner, Scope } from '../types.ts';
import { ErrorCode, NO_MODEL_MESSAGE, SubrunError } from '../errors.ts';
import { sleep, type Clock } from '../clock.ts';
import type { IdMaker } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Snapshot } from '../child/snapshot.ts';
import type { Runtime } from '../delegation/runtime.ts';
import { within } from '../telemetry/context.ts';
import type { TurnTelemetry } from '../telemetry/observer.ts';
import { withProps } from '../shapes.ts';

const PARENT_PROMPT = [
  'You are the parent agent of this session. You can do work yourself with your tools, and you can',
  'delegate independent pieces to subagents with delegate_task: they run in parallel, and each one',
  'reports back as a message when it finishes. Give each subagent everything it needs in its goal and',
  'context. When all the work is done, answer the user.',
].join('\n');

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A turn's end as hermes' `TurnStatus`: a failure of any kind is `error` (the text says which). */
function turnStatus(status: string): 'complete' | 'error' | 'interrupted' {
  return status === 'completed' ? 'complete' : status === 'interrupted' ? 'interrupted' : 'error';
}

export interface ParentAgentDeps {
  readonly runtime: Runtime;
  readonly config: OpenAIRunnerConfig | undefined;
  readonly ids: IdMaker;
  readonly logger: Logger;
  /** The runtime's clock: a turn's duration and its retry waits (a test moves it by hand). */
  readonly clock: Clock;
  /** The session's current binding (its generation changes on reset). */
  readonly owner: () => Owner;
  /** Sends a session event (numbered and routed like every other). */
  readonly emit: (type: string, payload: Record<string, unknown>) => void;
}

interface Turn {
  readonly turn_id: string;
  readonly abort: AbortController;
  readonly inbox: SteerInbox;
  /** Its `invoke_agent` span (under the prompt's request span) and model metrics. */
  readonly telemetry: TurnTelemetry;
}

export class ParentAgent {
  readonly #deps: ParentAgentDeps;
  #history: ChatMessage[] = [];
  #turn: Turn | undefined;
  #turns = 0;
  /** Delegations this parent spawned, per generation: the roots of its spawn tree. */
  #mine = new Set<string>();
  /** Its session closed: a turn still winding down may not spawn children nobody would release. */
  #closed = false;

  constructor(deps: ParentAgentDeps) {
    this.#deps = deps;
  }

  get running(): boolean {
    return this.#turn !== undefined;
  }

  /**
   * The conversation so far as rows a host can show (hermes' `TranscriptMessage`): what the user
   * said, the model's answers and the tools' results; the model's bare tool calls are no rows.
   */
  transcript(): { role: 'user' | 'assistant' | 'tool'; text: string }[] {
    const rows: { role: 'user' | 'assistant' | 'tool'; text: string }[] = [];
    for (const m of this.#history) if (m.role !== 'system' && m.content !== null) rows.push({ role: m.role, text: m.content });
    return rows;
  }

  /** Starts one turn in the background; it begins streaming at once (`message.start`). */
  submit(text: string): { status: 'streaming'; turn_id: string } {
    const config = this.#deps.config;
    if (!config) throw new SubrunError(ErrorCode.NoModel, NO_MODEL_MESSAGE);
    if (this.#turn) throw new SubrunError(ErrorCode.TurnRunning, 'a turn is already running: steer it with session.steer or stop it with session.interrupt');
    const turn_id = `turn_${++this.#turns}`;
    // Started here, in the request's step: the span parents on the request being handled.
    const telemetry = this.#deps.runtime.turn({ session_id: this.#deps.owner().session_id, turn_id, model: config.endpoint.model });
    const turn: Turn = { turn_id, abort: new AbortController(), inbox: new SteerInbox(), telemetry };
    this.#turn = turn;
    void this.#run(turn, config, text).catch((err: unknown) => {
      // A turn that threw still ends its span (end() is once only: a throw after the end changes nothing).
      turn.telemetry.end({ status: 'error', exit_reason: 'error', api_calls: 0, tokens: { input: 0, output: 0 } });
      this.#deps.logger.error({ err }, 'parent turn failed');
    });
    return { status: 'streaming', turn_id: turn.turn_id };
  }

  /** Queues guidance for the running turn; rejected when no turn runs (it would strand). */
  steer(text: string): { status: 'queued'; text: string; steer_id: string } | { status: 'rejected'; text: string } {
    const turn = this.#turn;
    const steer = turn?.inbox.push(this.#deps.ids.steer(), text);
    return steer ? { status: 'queued', text, steer_id: steer.steer_id } : { status: 'rejected', text };
  }

  /** Stops the running turn (if any); the caller interrupts the session's children. */
  interrupt(): boolean {
    const turn = this.#turn;
    if (!turn || turn.abort.signal.aborted) return false;
    turn.abort.abort('interrupt');
    return true;
  }

  /** The session closed: stops the turn for good; a spawn from its tools is refused from now on. */
  close(): void {
    this.#closed = true;
    this.interrupt();
    this.#history = [];
    this.#mine.clear();
  }

  /** session.reset: a new generation starts a fresh conversation. */
  reset(): void {
    this.interrupt();
    this.#history = [];
    this.#mine.clear();
  }

  async #run(turn: Turn, config: OpenAIRunnerConfig, text: string): Promise<void> {
    const { emit } = this.#deps;
    const childRunner = openaiRunner(withProps(config, { system_prompt: undefined }));
    const completions = new CompletionInbox();
    const tools = [...(config.tools ?? []), delegateTaskTool(this.#port(childRunner, turn.telemetry), completions)];
    const { clock } = this.#deps;
    const started = clock.now();
    // Before the first await: the host has it before prompt.submit's reply.
    emit('message.start', {});
    const r = await runAgentLoop(
      {
        endpoint: config.endpoint,
        system: `${PARENT_PROMPT}\n\n${STEER_PROMPT}`,
        messages: [...this.#history, { role: 'user', content: text }],
        tools,
        max_iterations: config.max_iterations ?? DEFAULT_MAX_ITERATIONS,
      },
      {
        signal: turn.abort.signal,
        sleep: (ms) => sleep(clock, ms, turn.abort.signal),
        onText: (d) => emit('message.delta', { turn_id: turn.turn_id, text: d }),
        onReasoning: (d) => emit('message.thinking', { turn_id: turn.turn_id, text: d }),
        onToolStart: (name, args, tool_id) => {
          // hermes' shapes: the model's call id and the function name; `args` only as an object.
          const shown = isRecord(args) ? { args } : {};
          const t0 = clock.now();
          const span = turn.telemetry.tool(name, tool_id);
          emit('tool.start', { turn_id: turn.turn_id, tool_id, name, ...shown, preview: preview(args) });
          return (output, ok) => {
            span.end(ok);
            emit('tool.complete', { turn_id: turn.turn_id, tool_id, name, ...shown, ok, duration_s: (clock.now() - t0) / 1000, preview: preview(output) });
          };
        },
        onModelRequest: (model, base_url) => turn.telemetry.chat({ model, base_url }),
        takeSteers: () => turn.inbox.take(),
        confirmSteers: (steers) => {
          for (const s of turn.inbox.confirm(steers)) emit('session.steer.delivered', { turn_id: turn.turn_id, steer_id: s.steer_id, text: s.text });
        },
        backgroundMessages: () => completions.drain(),
        awaitBackground: () => completions.next(turn.abort.signal, (cancel) => turn.inbox.waitForSteer(turn.abort.signal, cancel)),
        onRetry: (r) =>
          this.#deps.logger.info(
            { session_id: this.#deps.owner().session_id, turn_id: turn.turn_id, model: config.endpoint.model, ...r },
            'model request failed; retrying',
          ),
      },
    );
    // The atomic close, as for a child: stop accepting and take what is left in one step.
    const missed = turn.inbox.seal();
    this.#turn = undefined;
    if (r.status === 'completed') this.#history = r.messages;
    const entry = buildCompletionEntry({
      task_index: 0,
      subagent_id: turn.turn_id,
      status: r.status,
      exit_reason: r.exit_reason,
      summary: r.summary,
      error: r.error,
      api_calls: r.api_calls,
      tokens: r.tokens,
      duration_seconds: (clock.now() - started) / 1000,
      model: config.endpoint.model,
      missed: missed.map((s) => s.text),
    });
    turn.telemetry.end(entry);
    emit('message.complete', {
      turn_id: turn.turn_id,
      status: turnStatus(entry.status),
      text: entry.summary,
      // Only when it says more than the status: the turn hit max_iterations.
      ...(entry.exit_reason !== entry.status ? { exit_reason: entry.exit_reason } : {}),
      ...(entry.error !== undefined ? { error: entry.error } : {}),
      api_calls: entry.api_calls,
      tokens: entry.tokens,
      usage: { input: entry.tokens.input, output: entry.tokens.output, total: entry.tokens.input + entry.tokens.output, calls: entry.api_calls },
      ...(entry.missed_steer !== undefined ? { missed_steer: entry.missed_steer } : {}),
    });
  }

  #scope(): Scope {
    const o = this.#deps.owner();
    return { session_id: o.session_id, generation: o.generation };
  }

  /** The session's visible children that descend from a delegation this parent made. */
  #tree(): Map<string, Snapshot> {
    const all = this.#deps.runtime.scoped.list(this.#scope(), { include_finished: true });
    const byId = new Map(all.map((s) => [s.subagent_id, s]));
    const mine = new Map<string, Snapshot>();
    for (const s of all) {
      let root = s;
      while (root.parent_id !== null) {
        const up = byId.get(root.parent_id);
        if (!up) break;
        root = up;
      }
      if (root.parent_id === null && this.#mine.has(root.delegation_id)) mine.set(s.subagent_id, s);
    }
    return mine;
  }

  #port(runner: ReturnType<typeof openaiRunner>, telemetry: TurnTelemetry): DelegationPort {
    const rt = this.#deps.runtime;
    return {
      max_tasks: rt.limits.max_concurrent_children,
      spawn: (tasks) => {
        if (this.#closed) throw new SubrunError(ErrorCode.RuntimeClosed, 'the session has closed; it can no longer delegate');
        const delegate = () =>
          rt.delegate(
            tasks.map((t) => ({ goal: t.goal, context: t.context, runner, agent: OPENAI_AGENT })),
            { owner: this.#deps.owner() },
          );
        // Its delegation hangs under the turn (its delegate_task tool span, open now).
        const under = telemetry.spawnContext();
        const handle = under ? within(under, delegate) : delegate();
        this.#mine.add(handle.delegation_id);
        return handle;
      },
      list: () => [...this.#tree().values()],
      steer: (id, text) =>
        this.#tree().has(id) ? rt.scoped.steer(this.#scope(), id, text) : { status: 'rejected', subagent_id: id, text: text.trim(), reason: 'not_found' },
      stop: (id) => (this.#tree().has(id) ? rt.scoped.interrupt(this.#scope(), id) : { found: false, subagent_id: id, interrupted: [] }),
      // Any lost child of the session: after a restart the parent's tree is gone with its process.
      revive: (id) => {
        if (this.#closed) throw new SubrunError(ErrorCode.RuntimeClosed, 'the session has closed; it can no longer delegate');
        const revive = () => rt.revive(id, { scope: this.#scope(), owner: this.#deps.owner() });
        const under = telemetry.spawnContext();
        const r = under ? within(under, revive) : revive();
        this.#mine.add(r.handle.delegation_id);
        return r;
      },
    };
  }
}
