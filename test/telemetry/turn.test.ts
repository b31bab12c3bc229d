// A parent agent's turn as a span, into the SDK's InMemorySpanExporter with no context manager:
// prompt.submit's request span parents the turn's `invoke_agent` (gen_ai.agent.name=parent), under
// which hang its model requests, its delegate_task tool call and, under that, the delegation of the
// children it spawned. A worker's telemetry without an SDK forwards the context it got verbatim.
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RpcServer } from '../../src/server.ts';
import { workerTelemetry } from '../../src/remote/worker/worker-trace.ts';
import { answer, callTools, FakeModel } from '../helpers/fake-model.ts';
import { ModelRouter } from '../helpers/model-router.ts';
import { connectMemory, ok } from '../helpers/rpc-client.ts';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  trace.disable();
  await provider.shutdown();
});

let model: FakeModel;
let server: RpcServer | undefined;
beforeEach(async () => {
  model = await FakeModel.start();
});
afterEach(async () => {
  await server?.shutdown();
  await model.close();
});

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan) => s.spanContext().spanId;

describe('a parent agent’s turn', () => {
  it('is an invoke_agent span under its request, with its chat, tool and delegation spans under it', async () => {
    server = new RpcServer({ openai: { endpoint: { base_url: model.url, model: 'm' } }, max_spawn_depth: 2 });
    const router = new ModelRouter(model, answer('done'));
    router.parent.push(callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'count files' }] }, id: 'd1' }]));
    router.child('count files', answer('12 files', [7, 3]));
    const { client } = connectMemory(server);
    const { session_id } = await ok(client, 'session.create', {});
    const { turn_id } = await ok(client, 'prompt.submit', { session_id, text: 'a prompt that is content' });
    const complete = await client.waitForEvent((e) => e.type === 'message.complete' && e.payload.turn_id === turn_id);
    expect(complete.payload.status).toBe('complete');
    await client.waitForEvent((e) => e.type === 'delegation.complete');
    await provider.forceFlush();

    const spans = exporter.getFinishedSpans();
    const request = spans.find((s) => s.name === 'prompt.submit')!;
    const turns = spans.filter((s) => s.name === 'invoke_agent' && s.attributes['gen_ai.agent.name'] === 'parent');
    expect(turns).toHaveLength(1);
    const turn = turns[0]!;
    expect(parentOf(turn)).toBe(idOf(request));
    expect(turn.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': 'openai',
      'gen_ai.conversation.id': session_id,
      'gen_ai.request.model': 'm',
      'subrun.turn.id': turn_id,
      'subrun.status': 'completed',
      'subrun.api_calls': complete.payload.api_calls,
    });

    const chats = spans.filter((s) => s.name === 'chat m');
    const own = chats.filter((s) => parentOf(s) === idOf(turn));
    expect(own).toHaveLength(Number(complete.payload.api_calls));
    const tool = spans.find((s) => s.name === 'execute_tool delegate_task')!;
    expect(parentOf(tool)).toBe(idOf(turn));
    expect(tool.attributes['gen_ai.tool.call.id']).toBe('d1');
    const delegation = spans.find((s) => s.name === 'subrun.delegation')!;
    expect(parentOf(delegation)).toBe(idOf(tool));
    const child = spans.find((s) => s.name === 'invoke_agent' && s.attributes['subrun.goal'] === 'count files')!;
    expect(parentOf(child)).toBe(idOf(delegation));
    const childChat = chats.filter((s) => parentOf(s) === idOf(child));
    expect(childChat.map((s) => s.attributes['gen_ai.usage.input_tokens'])).toEqual([7]);
    // The turn's tree is one trace (session.create was a request of its own), with no content in it.
    expect(new Set(spans.filter((s) => s.name !== 'session.create').map((s) => s.spanContext().traceId))).toEqual(new Set([request.spanContext().traceId]));
    expect(JSON.stringify(spans.map((s) => ({ a: s.attributes, e: s.events })))).not.toContain('a prompt that is content');
  });
});

describe('a worker’s telemetry for one child', () => {
  it('without an SDK (no propagator), forwards the assignment’s trace context verbatim and records nothing', () => {
    const assigned = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'vendor=x' };
    const t = workerTelemetry(assigned);
    const carrier: Record<string, string> = {};
    t.inject(carrier);
    expect(carrier).toEqual(assigned);
    const before = exporter.getFinishedSpans().length;
    t.tool('look').end(true);
    t.chat({ model: 'm', base_url: 'http://127.0.0.1:1' }).end({ outcome: 'cancelled' });
    expect(exporter.getFinishedSpans()).toHaveLength(before);
  });
});
