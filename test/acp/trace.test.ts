// An IDE's W3C trace context reaches the turn: `session/prompt` with `_meta.traceparent` on a real
// `serve --acp` process exporting OTLP/JSON to a receiver in the test. The prompt's request span
// (`prompt.submit`) takes the IDE's span as its parent, the parent agent's turn (`invoke_agent`,
// gen_ai.agent.name=parent) hangs under it, its model request under the turn, all in the IDE's
// trace; a `_meta` that is not an object is ignored, never an error (the turn starts a new trace).
import * as acp from '@agentclientprotocol/sdk/unstable';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { attr, collector, spansOf, type Collector } from '../helpers/otlp.ts';
import { killAll } from '../helpers/process.ts';
import { FakeModel, Router, startAcp } from './harness.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const IDE_SPAN = '00f067aa0ba902b7';

let model: FakeModel;
let otlp: Collector;

beforeEach(async () => {
  model = await FakeModel.start();
  new Router(model);
  otlp = await collector();
});

afterEach(async () => {
  await killAll();
  await model.close();
  await otlp.close();
});

async function promptWith(meta: Record<string, unknown>): Promise<ReturnType<typeof spansOf>> {
  const s = startAcp(model.url, ['--otlp-endpoint', otlp.url], { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '20' });
  await s.initialize(true);
  const sessionId = await s.newSession();
  const r = await s.conn.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hello' }], _meta: meta });
  expect(r.stopReason).toBe('end_turn');
  // The end of stdin is the shutdown, which flushes every span before the exit.
  s.proc.child.stdin.end();
  expect(await s.proc.waitExit()).toEqual({ code: 0, signal: null });
  return spansOf(otlp.requests);
}

describe('ACP session/prompt _meta', () => {
  it("parents the turn on the IDE's traceparent", async () => {
    const spans = await promptWith({ traceparent: `00-${TRACE}-${IDE_SPAN}-01` });
    const request = spans.find((x) => x.name === 'prompt.submit');
    expect(request?.traceId).toBe(TRACE);
    expect(request?.parentSpanId).toBe(IDE_SPAN);
    const turn = spans.find((x) => x.name === 'invoke_agent' && attr(x, 'gen_ai.agent.name') === 'parent');
    expect(turn?.traceId).toBe(TRACE);
    expect(turn?.parentSpanId).toBe(request?.spanId);
    const chat = spans.find((x) => x.name.startsWith('chat '));
    expect(chat?.traceId).toBe(TRACE);
    expect(chat?.parentSpanId).toBe(turn?.spanId);
  });

  it('ignores a _meta that carries no usable context: the turn starts its own trace', async () => {
    const spans = await promptWith({ traceparent: 42 });
    const turn = spans.find((x) => x.name === 'invoke_agent' && attr(x, 'gen_ai.agent.name') === 'parent');
    expect(turn).toBeDefined();
    expect(turn?.traceId).not.toBe(TRACE);
    expect(turn?.traceId).toMatch(/^[0-9a-f]{32}$/);
  });
});
