// The built-in scripted runner: deterministic steps, for demos and tests (protocol section 6).
// Its delivery points are exactly two: right after each `tool` step, and inside `wait_steer`.
// No other step delivers, so every steer race of the protocol is reproducible from a script.
import { z } from 'zod';
import { isSubrunError } from '../../errors.ts';
import type { RunOutcome, Runner, RunnerContext } from '../../types.ts';

const text = z.string();
const ms = z.number().int().nonnegative();

const agentTaskSchema = z.looseObject({
  goal: z.string(),
  context: z.string().optional(),
  agent: z.unknown().optional(),
});

export const stepSchema = z.discriminatedUnion('op', [
  z.object({ op: z.literal('think'), text }),
  z.object({ op: z.literal('say'), text }),
  z.object({ op: z.literal('tool'), name: z.string().min(1), args: z.unknown().optional(), result: z.string().optional(), ms: ms.optional() }),
  z.object({ op: z.literal('sleep'), ms }),
  z.object({ op: z.literal('wait_steer'), timeout_ms: ms.optional() }),
  z.object({ op: z.literal('spawn'), tasks: z.array(agentTaskSchema) }),
  z.object({ op: z.literal('finish'), summary: z.string().optional() }),
  z.object({ op: z.literal('fail'), error: z.string() }),
  // stubborn: ignores interrupts too (a runner that never returns, to show abandonment).
  z.object({ op: z.literal('hang'), stubborn: z.boolean().optional() }),
]);
export type Step = z.infer<typeof stepSchema>;

export const scriptedAgentSchema = z.object({
  kind: z.literal('scripted'),
  steps: z.array(stepSchema).default([]),
});
export type ScriptedAgent = z.infer<typeof scriptedAgentSchema>;

export const SCRIPTED_MODEL = 'scripted';

const stepsSchema = z.array(stepSchema);

/**
 * A runner that plays `steps` in order, checked with the schema the wire uses (`agent: {kind: 'scripted'}`):
 * an unknown op or a step without what it needs is a TypeError naming it, never a child that
 * silently does nothing.
 */
export function scripted(steps: readonly Step[] = []): Runner {
  const checked = stepsSchema.safeParse(steps);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw new TypeError(`scripted: steps.${issue?.path.map(String).join('.') ?? ''}: ${issue?.message ?? 'invalid'}`);
  }
  return playing(checked.data);
}

/** Steps the wire's schema already checked (the scripted runner kind). */
export function playing(steps: readonly Step[]): Runner {
  return { model: SCRIPTED_MODEL, run: (ctx) => play(ctx, steps) };
}

/** The scripted runner's progress (RunnerContext.saveProgress): its first step not completed. */
interface ScriptProgress {
  readonly next_step: number;
  readonly last_say: string;
}

function resumePoint(ctx: RunnerContext): ScriptProgress {
  const p = ctx.restored?.progress;
  if (typeof p === 'object' && p !== null && 'next_step' in p && typeof p.next_step === 'number' && Number.isInteger(p.next_step) && p.next_step >= 0) {
    return { next_step: p.next_step, last_say: 'last_say' in p && typeof p.last_say === 'string' ? p.last_say : '' };
  }
  return { next_step: 0, last_say: '' };
}

async function play(ctx: RunnerContext, steps: readonly Step[]): Promise<RunOutcome> {
  // A revived child emits nothing for the steps its lost run completed, and runs again the one in progress.
  const from = resumePoint(ctx);
  let lastSay = from.last_say;
  for (let i = from.next_step; i < steps.length; i++) {
    const step = steps[i];
    if (step === undefined) break; // never: i is in bounds; an index loop keeps no iterator across the awaits
    await ctx.checkpoint(`step ${i} ${step.op}`);
    if (ctx.signal.aborted) return stopped(lastSay);
    switch (step.op) {
      case 'think':
        ctx.thinking(step.text);
        break;
      case 'say':
        lastSay = step.text;
        ctx.text(step.text);
        break;
      case 'tool': {
        const call = ctx.startTool(step.name, step.args);
        if (step.ms) await ctx.sleep(step.ms);
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the sleep
        if (ctx.signal.aborted) {
          call.finish('interrupted', false);
          return stopped(lastSay);
        }
        call.finish(step.result ?? 'ok');
        await ctx.checkpoint(`step ${i} deliver`);
        // Delivery point: after a tool step (on a worker, once the steers hold their receipts).
        await ctx.prepareDelivery();
        ctx.deliverSteers();
        break;
      }
      case 'sleep':
        await ctx.sleep(step.ms);
        break;
      case 'wait_steer':
        await waitSteer(ctx, step.timeout_ms);
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the wait
        if (ctx.signal.aborted) return stopped(lastSay);
        // Delivery point: inside wait_steer.
        ctx.deliverSteers();
        break;
      case 'spawn':
        await spawnStep(ctx, step.tasks);
        break;
      case 'finish':
        return { status: 'completed', summary: step.summary ?? lastSay };
      case 'fail':
        return { status: 'failed', error: step.error, summary: lastSay };
      case 'hang':
        await new Promise<void>((resolve) => {
          if (step.stubborn === true) return;
          if (ctx.signal.aborted) resolve();
          else ctx.signal.addEventListener('abort', () => resolve(), { once: true });
        });
        return stopped(lastSay);
    }
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the step
    if (ctx.signal.aborted) return stopped(lastSay);
    ctx.saveProgress({ next_step: i + 1, last_say: lastSay } satisfies ScriptProgress);
  }
  return { status: 'completed', summary: lastSay };
}

function stopped(lastSay: string): RunOutcome {
  return { status: 'interrupted', summary: lastSay };
}

async function waitSteer(ctx: RunnerContext, timeout_ms: number | undefined): Promise<void> {
  if (timeout_ms === undefined) return ctx.steerArrived();
  // Whichever side wins, cancel the other: a timed wait leaves no timer or waiter behind.
  const over = new AbortController();
  await Promise.race([ctx.steerArrived(over.signal), ctx.sleep(timeout_ms, over.signal)]);
  // With a reason: abort() without one builds a DOMException, which is costly.
  over.abort('settled');
}

async function spawnStep(ctx: RunnerContext, tasks: ReadonlyArray<z.infer<typeof agentTaskSchema>>): Promise<void> {
  let handle;
  try {
    handle = ctx.delegate(tasks);
  } catch (err) {
    // A refused spawn fails the step, not the child: the transcript says why and it goes on.
    ctx.write(`[spawn refused] ${isSubrunError(err) ? err.message : String(err)}`);
    return;
  }
  const stoppedEarly = new Promise<null>((resolve) => {
    if (ctx.signal.aborted) resolve(null);
    else ctx.signal.addEventListener('abort', () => resolve(null), { once: true });
  });
  const entries = await Promise.race([handle.results, stoppedEarly]);
  if (!entries) return;
  for (const e of entries) ctx.write(`[child ${e.subagent_id}] ${e.status}: ${e.summary || e.error || ''}`);
}
