// The runtime's spans through @opentelemetry/api into the SDK's InMemorySpanExporter, with no
// context manager registered: the tree is the subagent tree because every span is started with
// an explicit parent (across p-queue, timers and a grandchild's spawn), the attributes are the
// GenAI conventions', the child's span carries each steer's fate and the interrupt, and no content.
import { ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createRuntime } from '../../src/delegation/runtime.ts';
import { within } from '../../src/telemetry/context.ts';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  trace.disable();
  await provider.shutdown();
});

const scripted = (goal: string, steps: unknown[]) => ({ goal, agent: { kind: 'scripted', steps } });
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

it('invoke_agent spans nest as the subagent tree, with steer fates and the interrupt as events', async () => {
  const rt = createRuntime({ max_spawn_depth: 3, max_concurrent_children: 3 });
  const request = provider.getTracer('test').startSpan('request', { kind: SpanKind.SERVER });
  const longGoal = `waits ${'x'.repeat(300)}`;
  const handle = within(trace.setSpan(ROOT_CONTEXT, request), () =>
    rt.delegate([
      scripted('spawns', [
        { op: 'tool', name: 'search', args: { secret: 'tool-args-are-content' }, result: 'tool-output' },
        // The grandchild runs from the child's p-queue and sleeps on a timer: its span still nests.
        { op: 'spawn', tasks: [scripted('grandchild', [{ op: 'sleep', ms: 5 }, { op: 'finish' }])] },
        { op: 'finish' },
      ]),
      scripted(longGoal, [{ op: 'wait_steer', timeout_ms: 10_000 }, { op: 'finish' }]),
      scripted('hangs', [{ op: 'hang' }]),
    ]),
  );
  const [spawns, waits, hangs] = handle.subagent_ids as [string, string, string];
  expect(rt.steer(waits, 'steer-text-is-content').status).toBe('queued');
  const missed = rt.steer(hangs, 'never read');
  expect(missed.status).toBe('queued');
  expect(rt.interrupt(hangs).found).toBe(true);
  const entries = await handle.results;
  expect(entries.map((e) => e.status)).toEqual(['completed', 'completed', 'interrupted']);
  request.end();
  await provider.forceFlush();

  const spans = exporter.getFinishedSpans();
  const agents = new Map(spans.filter((s) => s.name === 'invoke_agent').map((s) => [String(s.attributes['gen_ai.agent.id']), s]));
  expect(agents.size).toBe(4);
  const delegations = spans.filter((s) => s.name === 'subrun.delegation');
  expect(delegations).toHaveLength(2);
  const top = delegations.find((d) => d.attributes['subrun.parent.id'] === undefined)!;
  const nested = delegations.find((d) => d.attributes['subrun.parent.id'] === spawns)!;
  // request -> delegation -> three children; the first child -> delegation -> the grandchild.
  expect(parentOf(top)).toBe(request.spanContext().spanId);
  for (const id of [spawns, waits, hangs]) expect(parentOf(agents.get(id)!)).toBe(top.spanContext().spanId);
  expect(parentOf(nested)).toBe(agents.get(spawns)!.spanContext().spanId);
  const grandchild = [...agents.values()].find((s) => s.attributes['subrun.depth'] === 1)!;
  expect(parentOf(grandchild)).toBe(nested.spanContext().spanId);
  expect(grandchild.attributes['subrun.parent.id']).toBe(spawns);
  expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set([request.spanContext().traceId]));

  const tool = spans.find((s) => s.name === 'execute_tool search')!;
  expect(parentOf(tool)).toBe(agents.get(spawns)!.spanContext().spanId);
  expect(tool.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search', 'gen_ai.tool.type': 'function' });

  const w = agents.get(waits)!;
  expect(w.attributes).toMatchObject({
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.provider.name': 'subrun',
    'subrun.depth': 0,
    'subrun.task_index': 1,
    'subrun.status': 'completed',
    'subrun.remote': false,
  });
  expect(w.attributes['subrun.goal']).toBe(longGoal.slice(0, 120));
  // p-queue starts a child in the same step that queues it (a free slot): started comes first.
  expect(w.events.map((e) => e.name)).toEqual(['subrun.started', 'subrun.steer.queued', 'subrun.steer.delivered']);
  const h = agents.get(hangs)!;
  expect(h.events.map((e) => e.name)).toEqual(['subrun.started', 'subrun.steer.queued', 'subrun.interrupt', 'subrun.steer.missed']);
  expect(h.events.find((e) => e.name === 'subrun.steer.missed')?.attributes).toEqual({
    'subrun.steer.id': missed.status === 'queued' ? missed.steer_id : '',
    'subrun.steer.maybe_delivered': false,
  });
  expect(h.events.find((e) => e.name === 'subrun.interrupt')?.attributes).toEqual({ 'subrun.interrupt.target': hangs });
  // An interrupt is no error; the span ends with the entry.
  expect(h.status.code).toBe(0);
  expect(h.attributes['subrun.status']).toBe('interrupted');

  // No content anywhere: not the steer text, not tool arguments or output.
  const everything = JSON.stringify(spans.map((s) => ({ a: s.attributes, e: s.events })));
  for (const content of ['steer-text-is-content', 'never read', 'tool-args-are-content', 'tool-output', 'x'.repeat(121)])
    expect(everything).not.toContain(content);
});
