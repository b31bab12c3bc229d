// The model agent loop, as a function with injected effects (stream hooks, tools, steering,
// sleep, signal), shared by a model-driven child and the session's parent agent:
//   take steers -> model call -> run the requested tools -> repeat
// until the model answers without tool calls (and nothing it started is still running), or
// max_iterations. Steers are taken only right before a model call (which is also right after a
// tool batch), each as its own user message after the last tool result; they count as delivered
// once a reply to a prompt holding them has fully arrived. Whatever was taken and not confirmed
// when the loop ends stays with the caller's inbox, which reports it as missed.
import type { ChatEnd, Ending, Steer, Tokens } from '../types.ts';
import { parseToolArguments, runTool, toToolSpec, type Tool } from './tools/tool.ts';
import { ModelError, streamChat, type ChatEndpoint, type ChatMessage, type RetryNotice, type Sleeper } from './chat.ts';
import { steerMessage } from './steer-marker.ts';

export interface LoopEffects {
  readonly signal: AbortSignal;
  readonly sleep: Sleeper;
  onText(delta: string): void;
  onReasoning(delta: string): void;
  /** A tool call starts (`call_id`: the model's id for the call); the returned function ends it. */
  onToolStart(name: string, args: unknown, call_id: string): (output: string, ok: boolean) => void;
  /** One model request begins (its span and metrics); told how it ended. */
  onModelRequest?(model: string, base_url: string): Ending<ChatEnd>;
  /** Awaited before each delivery point when given (a child on a worker gets its receipts). */
  prepareSteers?(): Promise<void>;
  takeSteers(): Steer[];
  confirmSteers(steers: readonly Steer[]): void;
  /** Messages that arrived in the background (children's completions), taken before each call. */
  backgroundMessages?(): string[];
  /**
   * Called when the model answered without tool calls: resolves with messages to add (e.g. the
   * completion of a child it delegated to) to go on — an empty list when a steer arrived while it
   * waited, which the next model call takes — or null when nothing is pending.
   */
  awaitBackground?(): Promise<string[] | null>;
  /**
   * A model turn and its tool calls are done: the conversation so far (without the system prompt),
   * for a runner that saves its progress (a revival after a restart continues from it).
   */
  onTurnDone?(messages: readonly ChatMessage[]): void;
  /** A model request is retried (once per retry, before its wait): the runner logs it. */
  onRetry?(retry: RetryNotice): void;
}

export interface LoopInput {
  readonly endpoint: ChatEndpoint;
  readonly system: string;
  /** The conversation so far (a parent's earlier turns) plus this turn's user message. */
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly Tool[];
  readonly max_iterations: number;
}

export interface LoopResult {
  readonly status: 'completed' | 'failed' | 'interrupted';
  readonly exit_reason: string;
  readonly summary: string;
  readonly error?: string;
  readonly api_calls: number;
  readonly tokens: Tokens;
  /** The conversation including this turn (a parent keeps it for its next turn). */
  readonly messages: ChatMessage[];
}

export async function runAgentLoop(input: LoopInput, fx: LoopEffects): Promise<LoopResult> {
  const messages: ChatMessage[] = [{ role: 'system', content: input.system }, ...input.messages];
  const tools = new Map(input.tools.map((t) => [t.name, t]));
  const specs = input.tools.map(toToolSpec);
  let pending: Steer[] = [];
  let api_calls = 0;
  let tokens: Tokens = { input: 0, output: 0 };
  let lastText = '';
  const end = (status: LoopResult['status'], extra: Partial<LoopResult> = {}): LoopResult => ({
    status,
    exit_reason: status,
    summary: lastText,
    api_calls,
    tokens,
    messages: messages.slice(1),
    ...extra,
  });

  for (let iteration = 0; ; iteration++) {
    if (fx.signal.aborted) return end('interrupted');
    if (iteration >= input.max_iterations) {
      return end('completed', {
        exit_reason: 'max_iterations',
        summary: `${lastText}${lastText ? '\n\n' : ''}[stopped after ${input.max_iterations} model calls (max_iterations); the work may be unfinished]`,
      });
    }
    for (const m of fx.backgroundMessages?.() ?? []) messages.push({ role: 'user', content: m });
    // Delivery point: before the model call, after the last tool result.
    if (fx.prepareSteers) await fx.prepareSteers();
    for (const s of fx.takeSteers()) {
      pending.push(s);
      messages.push({ role: 'user', content: steerMessage(s.text) });
    }
    let streamed = '';
    let reply;
    const request = fx.onModelRequest?.(input.endpoint.model, input.endpoint.base_url);
    try {
      reply = await streamChat(
        input.endpoint,
        { messages, tools: specs },
        {
          onText: (d) => {
            streamed += d;
            lastText = streamed;
            fx.onText(d);
          },
          onReasoning: (d) => fx.onReasoning(d),
          onRetry: (r) => fx.onRetry?.(r),
        },
        fx.signal,
        fx.sleep,
      );
    } catch (err) {
      api_calls += 1;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the await
      const cancelled = fx.signal.aborted || (err instanceof ModelError && err.kind === 'aborted');
      request?.end(cancelled ? { outcome: 'cancelled' } : { outcome: 'error', error_type: errorType(err) });
      if (cancelled) return end('interrupted');
      return end('failed', { error: err instanceof Error ? err.message : String(err) });
    }
    api_calls += 1;
    request?.end({ outcome: 'ok', finish_reason: reply.finish_reason, input_tokens: reply.usage.input, output_tokens: reply.usage.output });
    tokens = { input: tokens.input + reply.usage.input, output: tokens.output + reply.usage.output };
    // The model has answered a prompt holding these steers: they reached it.
    if (pending.length > 0) {
      fx.confirmSteers(pending);
      pending = [];
    }
    if (reply.content !== '') lastText = reply.content;
    messages.push({
      role: 'assistant',
      content: reply.content === '' ? null : reply.content,
      ...(reply.tool_calls.length > 0 ? { tool_calls: reply.tool_calls } : {}),
    });

    if (reply.tool_calls.length === 0) {
      const more = fx.awaitBackground ? await fx.awaitBackground() : null;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the await
      if (fx.signal.aborted) return end('interrupted');
      if (more !== null) {
        for (const m of more) messages.push({ role: 'user', content: m });
        continue;
      }
      return end('completed', { summary: reply.content });
    }
    for (const call of reply.tool_calls) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the await
      if (fx.signal.aborted) return end('interrupted');
      // Parsed once: the preview shows it, the tool gets it (bad JSON goes back to the model).
      const args = parseToolArguments(call.function.arguments);
      const done = fx.onToolStart(call.function.name, args.raw.trim() === '' ? '' : args.json, call.id);
      const run = await runTool(tools, call.function.name, args, { signal: fx.signal });
      done(run.output, run.ok);
      messages.push({ role: 'tool', tool_call_id: call.id, content: run.output });
    }
    fx.onTurnDone?.(messages.slice(1));
  }
}

/** A failed request's `error.type`: the HTTP status, `timeout`, else `_OTHER` (the semantic conventions' fallback). */
function errorType(err: unknown): string {
  if (!(err instanceof ModelError)) return '_OTHER';
  if (err.status !== undefined) return String(err.status);
  return err.kind === 'timeout' ? 'timeout' : '_OTHER';
}
