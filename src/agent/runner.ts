// The openai runner: a child driven by a model behind any OpenAI-compatible chat-completions
// server, with tools (built-in workspace tools, the caller's own, and delegate_task while depth
// allows), steering in the conversation, streamed text and reasoning, and usage accounting.
import { z } from 'zod';
import type { Tool } from './tools/tool.ts';
import type { ChatEnd, Ending, RunOutcome, Runner, RunnerContext } from '../types.ts';

const NO_ENDING: Ending<ChatEnd> = { end() {} };
import { defineRunnerKind, type RunnerKind } from '../delegation/runners/kinds.ts';
import { runAgentLoop } from './agent-loop.ts';
import type { ChatEndpoint, ChatMessage } from './chat.ts';
import type { Logger } from '../log.ts';
import { CompletionInbox, delegateTaskTool, type DelegationPort } from './delegate-task.ts';
import { STEER_PROMPT } from './steer-marker.ts';
import { withProps } from '../shapes.ts';

export interface OpenAIRunnerConfig {
  readonly endpoint: ChatEndpoint;
  /** Tools the child may call (delegate_task is added while its depth allows spawning). */
  readonly tools?: readonly Tool[];
  /** Model calls before the loop stops with exit_reason `max_iterations`. Default 50. */
  readonly max_iterations?: number;
  /** Replaces the first part of the system prompt (the steering rules are always appended). */
  readonly system_prompt?: string;
  /** Where a retried model request says so (one line at info per retry); none when absent. */
  readonly logger?: Logger;
}

export const DEFAULT_MAX_ITERATIONS = 50;

const CHILD_PROMPT = [
  'You are a subagent: a parent agent delegated one task to you. Work on it with the tools you have.',
  'You cannot ask the parent questions; make reasonable assumptions and say which.',
  'When you are done, answer without calling tools: that answer is your final report to the parent,',
  'so make it complete, concise and specific (what you found or did, and anything left open).',
].join('\n');

function taskMessage(ctx: RunnerContext): string {
  return ctx.context ? `Task: ${ctx.goal}\n\nContext:\n${ctx.context}` : `Task: ${ctx.goal}`;
}

export function openaiRunner(config: OpenAIRunnerConfig): Runner {
  const runner: Runner = {
    model: config.endpoint.model,
    async run(ctx): Promise<RunOutcome> {
      const inbox = new CompletionInbox();
      const tools = [...(config.tools ?? [])];
      if (ctx.can_delegate) tools.push(delegateTaskTool(childPort(ctx, runner), inbox));
      const r = await runAgentLoop(
        {
          endpoint: config.endpoint,
          system: `${config.system_prompt ?? CHILD_PROMPT}\n\n${STEER_PROMPT}`,
          messages: startingMessages(ctx),
          tools,
          max_iterations: config.max_iterations ?? DEFAULT_MAX_ITERATIONS,
        },
        {
          signal: ctx.signal,
          sleep: (ms) => ctx.sleep(ms),
          onText: (d) => ctx.textDelta(d),
          onReasoning: (d) => ctx.thinkingDelta(d),
          onToolStart: (name, args, call_id) => {
            const call = ctx.startTool(name, args, call_id);
            return (output, ok) => call.finish(output, ok);
          },
          onModelRequest: (model, base_url) => ctx.telemetry?.chat({ model, base_url }) ?? NO_ENDING,
          prepareSteers: () => ctx.prepareDelivery(),
          takeSteers: () => ctx.takeSteers(),
          confirmSteers: (steers) => ctx.confirmDelivered(steers),
          backgroundMessages: () => inbox.drain(),
          awaitBackground: () => inbox.next(ctx.signal, (cancel) => ctx.steerArrived(cancel)),
          onTurnDone: (messages) => ctx.saveProgress({ messages } satisfies ConversationProgress),
          onRetry: (r) => config.logger?.info({ subagent_id: ctx.subagent_id, model: config.endpoint.model, ...r }, 'model request failed; retrying'),
        },
      );
      return {
        status: r.status,
        summary: r.summary,
        ...(r.error !== undefined ? { error: r.error } : {}),
        exit_reason: r.exit_reason,
        api_calls: r.api_calls,
        tokens: r.tokens,
      };
    },
  };
  return runner;
}

/** The OpenAI runner's progress: its conversation after the last completed model turn. */
interface ConversationProgress {
  readonly messages: readonly ChatMessage[];
}

function isConversation(v: unknown): v is ConversationProgress {
  return typeof v === 'object' && v !== null && 'messages' in v && Array.isArray(v.messages) && v.messages.length > 0;
}

/**
 * A fresh child starts from its task; a revived one continues the lost child's conversation, told
 * in one added message why (the restart, and the host's text if it gave one).
 */
function startingMessages(ctx: RunnerContext): ChatMessage[] {
  const restored = ctx.restored;
  if (restored && isConversation(restored.progress)) return [...restored.progress.messages, { role: 'user', content: restored.note }];
  if (restored)
    return [
      {
        role: 'user',
        content: `${taskMessage(ctx)}

${restored.note}`,
      },
    ];
  return [{ role: 'user', content: taskMessage(ctx) }];
}

/** A child's delegate_task reaches only its own subtree; grandchildren run on the same model. */
function childPort(ctx: RunnerContext, runner: Runner): DelegationPort {
  return {
    max_tasks: ctx.max_batch,
    // `agent`: how a later process makes the same runner (a revival after a restart).
    spawn: (tasks) => ctx.delegate(tasks.map((t) => ({ goal: t.goal, context: t.context, runner, agent: OPENAI_AGENT }))),
    list: () => ctx.subtree.list(),
    steer: (id, text) => ctx.subtree.steer(id, text),
    stop: (id) => ctx.subtree.interrupt(id),
  };
}

/** The `agent` spec of a child this runner's tool spawns: the server's openai kind makes it again. */
export const OPENAI_AGENT = { kind: 'openai' } as const;

export const openaiAgentSchema = z.strictObject({
  kind: z.literal('openai'),
  model: z.string().min(1).optional(),
  max_iterations: z.number().int().min(1).max(1000).optional(),
});

/**
 * The `openai` runner kind for `agent: {kind: "openai", model?, max_iterations?}`. Without a
 * configured endpoint every such task is refused with a message saying how to configure one.
 */
export function openaiKind(config: OpenAIRunnerConfig | undefined): RunnerKind {
  if (!config) {
    const refused = openaiAgentSchema.refine(() => false, {
      message: 'the openai runner is not configured: start subrun with --base-url and --model (or SUBRUN_BASE_URL / SUBRUN_MODEL)',
      path: ['kind'],
    });
    // The schema refuses every spec and a kind creates only from accepted ones: never reached.
    return defineRunnerKind(refused, () => {
      throw new Error('the openai runner is not configured');
    });
  }
  return defineRunnerKind(openaiAgentSchema, (spec) =>
    openaiRunner(
      withProps(config, {
        endpoint: withProps(config.endpoint, { model: spec.model ?? config.endpoint.model }),
        max_iterations: spec.max_iterations ?? config.max_iterations,
      }),
    ),
  );
}
