// The session's parent agent over JSON-RPC on the in-memory transport, with its model (and its
// children's) behind a local fake model server: prompt.submit and its event stream, delegate_task
// (spawn, list, steer, stop, the batch cap, refusal of foreign children), children's completions
// coming back into the parent's conversation, session.steer, session.interrupt, and the errors of
// a busy turn and of a server without a model. Requests are routed by their system prompt (parent
// or child) and, for children, by their task. No sleeps: every wait is on an event or a request.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { STEER_CLOSE, STEER_OPEN } from '../../src/agent/steer-marker.ts';
import type { CompletionEntry } from '../../src/types.ts';
import { RpcCode } from '../../src/server/errors.ts';
import { wireEventSchema } from '../../src/contract/wire.ts';
import { wireEntry } from '../helpers/wire-entry.ts';
import { RpcServer, type ServerOptions } from '../../src/server.ts';
import { defineTool } from '../../src/agent/tools/tool.ts';
import { answer, callTools, FakeModel, textChunk, toolCallChunk, finishChunk, usageChunk, type RecordedRequest } from '../helpers/fake-model.ts';
import { CHILD, deferred, ModelRouter as Router, PARENT, systemOf } from '../helpers/model-router.ts';
import { connectMemory, fails, isEvent, ok, privateKeyLeaks, type RpcTestClient, type WireEvent } from '../helpers/rpc-client.ts';

// ---- harness ----

type Msg = RecordedRequest['body']['messages'][number];

const echo = defineTool({
  name: 'echo',
  description: 'Echo the text back.',
  schema: z.strictObject({ text: z.string() }),
  handler: ({ text }) => `echo: ${text}`,
});

const HANG = { kind: 'scripted', steps: [{ op: 'hang' }] };

let model: FakeModel;
const servers: RpcServer[] = [];

beforeEach(async () => {
  model = await FakeModel.start();
});

afterEach(async () => {
  for (const s of servers.splice(0)) await s.shutdown();
  await model.close();
});

interface Env {
  readonly server: RpcServer;
  readonly client: RpcTestClient;
  readonly session_id: string;
  readonly router: Router;
  /** Submits a prompt; resolves with the turn id. */
  submit(text: string): Promise<string>;
  /** The turn's message.complete payload. */
  completeOf(turn_id: string): Promise<Record<string, unknown>>;
  /** The id of the child with this goal (from its spawn_requested event). */
  idOf(goal: string): string;
  /** Every event received so far is valid on the wire, and each session's seq rises by one. */
  checkEvents(): void;
}

async function env(options: ServerOptions = {}): Promise<Env> {
  const server = new RpcServer({ openai: { endpoint: { base_url: model.url, model: 'm' }, tools: [echo] }, max_spawn_depth: 2, ...options });
  servers.push(server);
  const router = new Router(model);
  const { client } = connectMemory(server);
  const { session_id } = await ok(client, 'session.create', {});
  return {
    server,
    client,
    session_id,
    router,
    async submit(text) {
      const r = await ok(client, 'prompt.submit', { session_id, text });
      expect(r.status).toBe('streaming');
      return r.turn_id;
    },
    async completeOf(turn_id) {
      const e = await client.waitForEvent((x) => x.type === 'message.complete' && x.payload.turn_id === turn_id);
      return e.payload;
    },
    idOf(goal) {
      const e = client.events.find((x) => x.type === 'subagent.spawn_requested' && x.payload.goal === goal);
      if (!e) throw new Error(`no child with goal ${goal}`);
      return e.payload.subagent_id as string;
    },
    checkEvents() {
      checkEvents(client);
    },
  };
}

function checkEvents(client: RpcTestClient): void {
  const last = new Map<string, number>();
  for (const e of client.events) {
    wireEventSchema.parse(e);
    if (e.session_id === undefined) continue;
    expect(e.seq).toBe((last.get(e.session_id) ?? 0) + 1);
    last.set(e.session_id, e.seq);
  }
  expect(privateKeyLeaks(client)).toEqual([]);
}

const toolResultIn = (req: RecordedRequest | undefined, id: string) => req?.body.messages.find((m) => m.role === 'tool' && m.tool_call_id === id)?.content;
const completionMessages = (req: RecordedRequest | undefined) =>
  (req?.body.messages ?? []).filter((m: Msg) => m.role === 'user' && m.content?.startsWith('[subagent '));
const steerText = (text: string) => `${STEER_OPEN}\n${text}\n${STEER_CLOSE}`;
const ofTurn = (client: RpcTestClient, turn_id: string) => client.events.filter((e) => e.payload.turn_id === turn_id);

// ---- prompt.submit ----

describe('parent agent: prompt.submit', () => {
  it('streams message.delta, tool.start, tool.complete and one message.complete, each valid on the wire', async () => {
    const e = await env();
    e.router.parent.push(
      {
        chunks: [textChunk('Checking. '), toolCallChunk(0, 'p1', 'echo', '{"text":"hi"}'), finishChunk('tool_calls'), usageChunk(30, 4)],
      },
      { chunks: [textChunk('All '), textChunk('good.'), finishChunk('stop'), usageChunk(40, 6)] },
    );
    const turn = await e.submit('  say hi  ');
    const done = await e.completeOf(turn);
    expect(done).toEqual({
      turn_id: turn,
      status: 'complete',
      text: 'All good.',
      api_calls: 2,
      tokens: { input: 70, output: 10 },
      usage: { input: 70, output: 10, total: 80, calls: 2 },
    });
    // The turn began streaming with one message.start, before anything else of it.
    const starts = e.client.events.filter((x) => x.type === 'message.start');
    expect(starts.map((x) => x.payload)).toEqual([{}]);
    expect(e.client.events.indexOf(starts[0] as WireEvent)).toBeLessThan(e.client.events.findIndex((x) => x.payload.turn_id === turn));

    const stream = ofTurn(e.client, turn).map((x) => [x.type, x.payload.text ?? x.payload.name]);
    expect(stream).toEqual([
      ['message.delta', 'Checking. '],
      ['tool.start', 'echo'],
      ['tool.complete', 'echo'],
      ['message.delta', 'All '],
      ['message.delta', 'good.'],
      ['message.complete', 'All good.'],
    ]);
    const start = ofTurn(e.client, turn).find((x) => x.type === 'tool.start') as WireEvent;
    const complete = ofTurn(e.client, turn).find((x) => x.type === 'tool.complete') as WireEvent;
    // hermes' shapes: the model's tool-call id, the function name, the arguments as an object.
    expect(start.payload).toEqual({ turn_id: turn, tool_id: 'p1', name: 'echo', args: { text: 'hi' }, preview: '{"text":"hi"}' });
    expect(complete.payload).toEqual({
      turn_id: turn,
      tool_id: 'p1',
      name: 'echo',
      args: { text: 'hi' },
      ok: true,
      duration_s: expect.any(Number),
      preview: 'echo: hi',
    });
    for (const x of ofTurn(e.client, turn)) expect(x.session_id).toBe(e.session_id);

    // The parent's prompt: its own system prompt, the user's text (trimmed), its tools.
    const first = e.router.parentRequests[0] as RecordedRequest;
    expect(systemOf(first).startsWith(PARENT)).toBe(true);
    expect(first.body.messages[1]).toEqual({ role: 'user', content: 'say hi' });
    expect(first.body.tools?.map((t) => t.function.name)).toEqual(['echo', 'delegate_task']);
    expect(toolResultIn(e.router.parentRequests[1], 'p1')).toBe('echo: hi');
    e.checkEvents();
  });

  it('the conversation carries over to the next turn', async () => {
    const e = await env();
    e.router.parent.push(answer('first answer'), answer('second answer'));
    const t1 = await e.submit('first question');
    await e.completeOf(t1);
    const t2 = await e.submit('second question');
    expect(t2).not.toBe(t1);
    expect((await e.completeOf(t2)).text).toBe('second answer');
    const second = e.router.parentRequests[1] as RecordedRequest;
    expect(second.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
    ]);
    e.checkEvents();
  });

  it('a failed model call ends the turn with status failed and the error', async () => {
    const e = await env();
    e.router.parent.push({ status: 401, body: JSON.stringify({ error: { message: 'bad key' } }) });
    const turn = await e.submit('hello');
    const done = await e.completeOf(turn);
    expect(done.status).toBe('error');
    expect(String(done.error)).toContain('401');
    expect(e.router.parentRequests).toHaveLength(1);
    e.checkEvents();
  });

  it('prompt.submit while a turn runs is 4013; empty text is 4002; another transport is 4001', async () => {
    const e = await env();
    e.router.parent.push({ chunks: [textChunk('thinking')], hang: true });
    const turn = await e.submit('long task');
    await e.client.waitForEvent(isEvent('message.delta'));
    const busy = await fails(e.client, 'prompt.submit', { session_id: e.session_id, text: 'another' });
    expect(busy.code).toBe(RpcCode.TurnRunning);
    expect(busy.code).toBe(4013);
    expect((await fails(e.client, 'prompt.submit', { session_id: e.session_id, text: '   ' })).code).toBe(4002);
    const other = connectMemory(e.server).client;
    expect((await fails(other, 'prompt.submit', { session_id: e.session_id, text: 'hijack' })).code).toBe(4001);
    expect(e.router.parentRequests).toHaveLength(1);
    await ok(e.client, 'session.interrupt', { session_id: e.session_id });
    expect((await e.completeOf(turn)).status).toBe('interrupted');
    e.checkEvents();
  });
});

// ---- delegate_task ----

describe('parent agent: delegate_task', () => {
  it("spawns children on the same model; a child finishing arrives in the parent's next request as a user message", async () => {
    const e = await env();
    const parentWaiting = deferred();
    e.router.parent.push(
      callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'count files', context: 'only in src' }] }, id: 'd1' }]),
      () => {
        parentWaiting.resolve();
        return answer('I will wait for the count.');
      },
      answer('There are 12 files.'),
    );
    // The child answers only once the parent's second request is out, so its completion must
    // come in the third.
    e.router.child('count files', { ...answer('12 files'), gates: { 0: parentWaiting.promise } });
    const turn = await e.submit('how many files?');
    const done = await e.completeOf(turn);
    expect(done).toMatchObject({ status: 'complete', text: 'There are 12 files.', api_calls: 3 });

    const id = e.idOf('count files');
    const [p1, p2, p3] = e.router.parentRequests;
    expect(toolResultIn(p2, 'd1')).toBe(
      `Started 1 subagent(s): ${id} (count files). They run in the background; each one's result will arrive here as a message when it finishes. Do not poll and do not spawn the same task again. Use action "steer" to send one guidance or "stop" to end one.`,
    );
    expect(completionMessages(p1)).toEqual([]);
    expect(completionMessages(p2)).toEqual([]);
    expect(p3?.body.messages.at(-1)).toEqual({ role: 'user', content: `[subagent ${id} finished: completed] goal: count files\nresult: 12 files` });

    // The child: its own prompt and task, the server's tools plus delegate_task (depth allows it).
    const child = e.router.childRequests.get('count files')?.[0] as RecordedRequest;
    expect(systemOf(child).startsWith(CHILD)).toBe(true);
    expect(child.body.messages[1]).toEqual({ role: 'user', content: 'Task: count files\n\nContext:\nonly in src' });
    expect(child.body.model).toBe('m');
    expect(child.body.tools?.map((t) => t.function.name)).toEqual(['echo', 'delegate_task']);

    // The wire saw the child's life.
    const spawned = await e.client.waitForEvent(isEvent('subagent.spawn_requested', id));
    expect(spawned.payload).toMatchObject({ parent_id: null, depth: 0, goal: 'count files', task_count: 1 });
    const complete = await e.client.waitForEvent(isEvent('subagent.complete', id));
    expect(wireEntry(complete.payload)).toMatchObject({ status: 'completed', summary: '12 files', model: 'm', api_calls: 1 });
    await e.client.waitForEvent(isEvent('delegation.complete'));
    e.checkEvents();
  });

  it('list shows only its own children; steer and stop work on them and refuse foreign ones, answering in words', async () => {
    const e = await env();
    // Foreign children: one the host spawned in this session, one of another session.
    const {
      subagent_ids: [sameSession],
    } = await ok(e.client, 'delegation.spawn', { session_id: e.session_id, tasks: [{ goal: 'host job', agent: HANG }] });
    const other = connectMemory(e.server).client;
    const otherSession = await ok(other, 'session.create', {});
    const {
      subagent_ids: [otherSessionChild],
    } = await ok(other, 'delegation.spawn', { session_id: otherSession.session_id, tasks: [{ goal: 'other job', agent: HANG }] });
    const F1 = sameSession as string;
    const F2 = otherSessionChild as string;

    const betaStreamed = e.client.waitForEvent((x) => x.type === 'subagent.text' && x.payload.goal === 'beta');
    const steerQueued = e.client.waitForEvent((x) => x.type === 'tool.complete' && String(x.payload.preview).startsWith('Queued for'));
    e.router.parent.push(
      callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'alpha' }, { goal: 'beta' }] }, id: 'spawn' }]),
      callTools([{ name: 'delegate_task', args: { action: 'list' }, id: 'list' }]),
      () => callTools([{ name: 'delegate_task', args: { action: 'steer', subagent_id: e.idOf('alpha'), message: 'focus on the tests' }, id: 'steer' }]),
      () => ({
        ...callTools([
          { name: 'delegate_task', args: { action: 'steer', subagent_id: F1, message: 'hello' }, id: 'steerF1' },
          { name: 'delegate_task', args: { action: 'steer', subagent_id: F2, message: 'hello' }, id: 'steerF2' },
          { name: 'delegate_task', args: { action: 'stop', subagent_id: F1 }, id: 'stopF1' },
          { name: 'delegate_task', args: { action: 'stop', subagent_id: F2 }, id: 'stopF2' },
          { name: 'delegate_task', args: { action: 'stop', subagent_id: e.idOf('beta') }, id: 'stopBeta' },
        ]),
        // beta is stopped only once its text has streamed, so that text is its summary.
        gates: { 0: betaStreamed },
      }),
    );
    // Then: wait until both children's results are in, and answer.
    e.router.parentFallback = (req) => (completionMessages(req).length >= 2 ? answer('alpha done, beta stopped') : answer('waiting'));
    e.router.child('alpha', { ...callTools([{ name: 'echo', args: { text: 'a' }, id: 'a1' }]), gates: { 0: steerQueued } }, answer('alpha result'));
    e.router.child('beta', { chunks: [textChunk('beta working')], hang: true });

    const turn = await e.submit('run alpha and beta');
    const done = await e.completeOf(turn);
    expect(done.status).toBe('complete');
    expect(done.text).toBe('alpha done, beta stopped');

    const alpha = e.idOf('alpha');
    const beta = e.idOf('beta');
    const last = e.router.parentRequests.at(-1);
    const result = (id: string) => toolResultIn(last, id) ?? '';
    const listed = result('list').split('\n');
    expect(listed).toHaveLength(2);
    expect(listed.find((l) => l.startsWith(`${alpha}  `))).toContain('goal: alpha');
    expect(listed.find((l) => l.startsWith(`${beta}  `))).toContain('goal: beta');
    expect(result('list')).not.toContain(F1);
    expect(result('list')).not.toContain(F2);
    expect(result('steer')).toBe(
      `Queued for ${alpha}. It will see your message at its next step; if it finishes first, your message comes back with its result. Do not send it again.`,
    );
    expect(result('steerF1')).toBe(`No subagent ${F1} in your delegation tree. Use action "list" to see yours.`);
    expect(result('steerF2')).toBe(`No subagent ${F2} in your delegation tree. Use action "list" to see yours.`);
    expect(result('stopF1')).toMatch(new RegExp(`^${F1} is not a running subagent of yours .*Use action "list" to see yours`));
    expect(result('stopF2')).toMatch(new RegExp(`^${F2} is not a running subagent of yours `));
    expect(result('stopBeta')).toBe(`Stopping ${beta}. Their results (status interrupted) will arrive as completion messages.`);

    // The steer reached alpha's next model call, after its tool result, and was delivered.
    const alphaReqs = e.router.childRequests.get('alpha') ?? [];
    expect(alphaReqs[1]?.body.messages.at(-1)).toEqual({ role: 'user', content: steerText('focus on the tests') });
    const delivered = await e.client.waitForEvent(isEvent('subagent.steer.delivered', alpha));
    expect(delivered.payload.text).toBe('focus on the tests');
    // beta was stopped mid-stream: the model server saw the request go away.
    await e.router.childRequests.get('beta')?.[0]?.aborted;

    const entries = completionMessages(last).map((m) => m.content);
    expect(entries).toHaveLength(2);
    expect(entries).toContain(`[subagent ${alpha} finished: completed] goal: alpha\nresult: alpha result`);
    expect(entries).toContain(`[subagent ${beta} finished: interrupted] goal: beta\nresult: beta working\nerror: interrupted`);

    // The foreign children were neither stopped nor steered: still running, and no trace of the steer.
    const mine = await ok(e.client, 'subagent.list', { session_id: e.session_id });
    expect(mine.subagents.find((s) => s.subagent_id === F1)?.status).toBe('running');
    const theirs = await ok(other, 'subagent.list', { session_id: otherSession.session_id });
    expect(theirs.subagents.find((s) => s.subagent_id === F2)?.status).toBe('running');
    await ok(e.client, 'subagent.interrupt', { session_id: e.session_id, subagent_id: F1 });
    const f1Entry = wireEntry((await e.client.waitForEvent(isEvent('subagent.complete', F1))).payload) as unknown as CompletionEntry;
    expect(f1Entry.status).toBe('interrupted');
    expect(f1Entry.missed_steer).toBeUndefined();
    // The other session never heard of this session's parent.
    expect(other.events.some((x) => x.session_id === e.session_id)).toBe(false);
    e.checkEvents();
    checkEvents(other);
  });

  it('a batch over the cap is refused in words, and nothing spawns; bad arguments go back as an error result', async () => {
    const e = await env();
    const tasks = ['a', 'b', 'c', 'd'].map((goal) => ({ goal }));
    e.router.parent.push(
      callTools([
        { name: 'delegate_task', args: { tasks }, id: 'big' },
        { name: 'delegate_task', args: { tasks: [{ goal: 'x' }], action: 'list' }, id: 'both' },
        { name: 'delegate_task', args: { action: 'steer', subagent_id: 'sa_nobody' }, id: 'nomsg' },
      ]),
      answer('ok, I will split it'),
    );
    const turn = await e.submit('do four things');
    await e.completeOf(turn);
    const second = e.router.parentRequests[1];
    expect(toolResultIn(second, 'big')).toBe('Refused: at most 3 tasks per call, you sent 4. Split the work into batches of at most 3 and call again.');
    expect(toolResultIn(second, 'both')).toMatch(/^error: invalid arguments for delegate_task: .*give either tasks \(to spawn\) or action/);
    expect(toolResultIn(second, 'nomsg')).toBe('To steer, give subagent_id and a non-empty message.');
    expect(e.client.events.filter((x) => x.type === 'subagent.spawn_requested')).toEqual([]);
    expect(e.router.childRequests.size).toBe(0);
    e.checkEvents();
  });

  it('with max_spawn_depth 2 a child delegates once more; the grandchild cannot, and its result comes back to the child', async () => {
    const e = await env();
    e.router.parent.push(callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'lead' }] }, id: 'd1' }]));
    e.router.parentFallback = (req) => (completionMessages(req).length >= 1 ? answer('lead finished') : answer('waiting'));
    e.router.child('lead', callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'helper' }] }, id: 'g1' }]));
    e.router.child('lead', (req) => (completionMessages(req).length >= 1 ? answer('helper said 42') : answer('waiting for helper')));
    e.router.child('lead', (req) => (completionMessages(req).length >= 1 ? answer('helper said 42') : answer('still waiting')));
    e.router.child('helper', answer('42'));
    const turn = await e.submit('delegate deeply');
    expect((await e.completeOf(turn)).text).toBe('lead finished');
    const lead = e.idOf('lead');
    const helper = e.idOf('helper');
    const spawned = e.client.events.find((x) => x.type === 'subagent.spawn_requested' && x.payload.subagent_id === helper) as WireEvent;
    expect(spawned.payload).toMatchObject({ parent_id: lead, depth: 1 });
    const helperReq = e.router.childRequests.get('helper')?.[0] as RecordedRequest;
    expect(helperReq.body.tools?.map((t) => t.function.name)).toEqual(['echo']);
    const leadLast = e.router.childRequests.get('lead')?.at(-1);
    expect(completionMessages(leadLast).map((m) => m.content)).toEqual([`[subagent ${helper} finished: completed] goal: helper\nresult: 42`]);
    const leadEntry = wireEntry((await e.client.waitForEvent(isEvent('subagent.complete', lead))).payload) as unknown as CompletionEntry;
    expect(leadEntry.summary).toBe('helper said 42');
    e.checkEvents();
  });
});

// ---- session.steer / session.interrupt ----

describe('parent agent: session.steer and session.interrupt', () => {
  it('session.steer while a turn runs is queued, reaches the next model call, and is reported delivered after it', async () => {
    const e = await env();
    const hold = deferred();
    const holdSecond = deferred();
    e.router.parent.push(
      { ...callTools([{ name: 'echo', args: { text: 'x' }, id: 'p1' }]), gates: { 0: hold.promise } },
      { chunks: [textChunk('Brief: '), textChunk('done.'), finishChunk('stop'), usageChunk(1, 1)], gates: { 1: holdSecond.promise } },
    );
    const turn = await e.submit('work');
    await model.waitForRequests(1);
    const st = await ok(e.client, 'session.steer', { session_id: e.session_id, text: '  be brief  ' });
    expect(st).toMatchObject({ session_id: e.session_id, status: 'queued', text: 'be brief' });
    expect(st).not.toHaveProperty('delivered');
    hold.resolve();
    await e.client.waitForEvent((x) => x.type === 'message.delta' && x.payload.text === 'Brief: ');
    expect(e.client.events.filter((x) => x.type === 'session.steer.delivered')).toEqual([]);
    holdSecond.resolve();
    const delivered = await e.client.waitForEvent(isEvent('session.steer.delivered'));
    expect(delivered.payload).toEqual({ turn_id: turn, steer_id: st.status === 'queued' ? st.steer_id : '', text: 'be brief' });
    const done = await e.completeOf(turn);
    expect(done).not.toHaveProperty('missed_steer');
    const second = e.router.parentRequests[1] as RecordedRequest;
    expect(second.body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(second.body.messages.at(-1)).toEqual({ role: 'user', content: steerText('be brief') });
    // After the turn: nothing to steer.
    const late = await ok(e.client, 'session.steer', { session_id: e.session_id, text: 'too late' });
    expect(late).toEqual({ session_id: e.session_id, status: 'rejected', text: 'too late' });
    e.checkEvents();
  });

  it('session.steer while the parent waits for its children wakes it: the steer reaches a new model call', async () => {
    const e = await env();
    e.router.parent.push(callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'endless' }] }, id: 'd1' }]), answer('Waiting for the subagent.'), () =>
      callTools([{ name: 'delegate_task', args: { action: 'stop', subagent_id: e.idOf('endless') }, id: 'stop' }]),
    );
    e.router.parentFallback = (req) => (completionMessages(req).length >= 1 ? answer('Stopped it, as asked.') : answer('waiting'));
    e.router.child('endless', { chunks: [textChunk('working forever')], hang: true });
    const turn = await e.submit('start the endless job');
    await e.client.waitForEvent((x) => x.type === 'message.delta' && x.payload.text === 'Waiting for the subagent.');
    await e.client.waitForEvent(isEvent('subagent.text', e.idOf('endless')));
    const st = await ok(e.client, 'session.steer', { session_id: e.session_id, text: 'stop that job' });
    expect(st.status).toBe('queued');
    const done = await e.completeOf(turn);
    expect(done).toMatchObject({ status: 'complete', text: 'Stopped it, as asked.' });
    expect(done).not.toHaveProperty('missed_steer');
    const third = e.router.parentRequests[2] as RecordedRequest;
    expect(third.body.messages.at(-1)).toEqual({ role: 'user', content: steerText('stop that job') });
    expect(completionMessages(third)).toEqual([]);
    const delivered = await e.client.waitForEvent(isEvent('session.steer.delivered'));
    expect(delivered.payload).toMatchObject({ turn_id: turn, text: 'stop that job' });
    const entry = wireEntry((await e.client.waitForEvent(isEvent('subagent.complete', e.idOf('endless')))).payload) as unknown as CompletionEntry;
    expect(entry.status).toBe('interrupted');
    e.checkEvents();
  });

  it('session.steer with no running turn is rejected; a steer during the final answer comes back as missed_steer', async () => {
    const e = await env();
    expect(await ok(e.client, 'session.steer', { session_id: e.session_id, text: 'anyone?' })).toEqual({
      session_id: e.session_id,
      status: 'rejected',
      text: 'anyone?',
    });
    expect((await fails(e.client, 'session.steer', { session_id: e.session_id, text: ' ' })).code).toBe(4002);
    const hold = deferred();
    e.router.parent.push({ ...answer('the answer'), gates: { 0: hold.promise } });
    const turn = await e.submit('quick one');
    await model.waitForRequests(1);
    expect((await ok(e.client, 'session.steer', { session_id: e.session_id, text: 'and cite sources' })).status).toBe('queued');
    hold.resolve();
    const done = await e.completeOf(turn);
    expect(done).toMatchObject({ status: 'complete', missed_steer: 'and cite sources' });
    expect(done.text).toBe('the answer\n\n[steer did not land — the subagent finished before it could be delivered: and cite sources]');
    expect(e.router.parentRequests).toHaveLength(1);
    expect(e.client.events.filter((x) => x.type === 'session.steer.delivered')).toEqual([]);
    e.checkEvents();
  });

  it("session.interrupt stops the turn (message.complete interrupted, with the text so far) and the session's children", async () => {
    const e = await env();
    e.router.parent.push(callTools([{ name: 'delegate_task', args: { tasks: [{ goal: 'slow' }] }, id: 'd1' }]), {
      chunks: [textChunk('Still thinking')],
      hang: true,
    });
    e.router.child('slow', { chunks: [textChunk('child working')], hang: true });
    const turn = await e.submit('start something slow');
    await e.client.waitForEvent((x) => x.type === 'message.delta' && x.payload.text === 'Still thinking');
    const child = e.idOf('slow');
    await e.client.waitForEvent(isEvent('subagent.text', child));
    const r = await ok(e.client, 'session.interrupt', { session_id: e.session_id });
    expect(r).toEqual({ session_id: e.session_id, status: 'interrupted', interrupted: true, turn_interrupted: true, stopped: [child] });
    const done = await e.completeOf(turn);
    expect(done).toMatchObject({ turn_id: turn, status: 'interrupted', text: 'Still thinking' });
    const entry = wireEntry((await e.client.waitForEvent(isEvent('subagent.complete', child))).payload) as unknown as CompletionEntry;
    expect(entry).toMatchObject({ status: 'interrupted', summary: 'child working' });
    await e.router.parentRequests[1]?.aborted;
    await e.router.childRequests.get('slow')?.[0]?.aborted;
    // Nothing left to stop; and a new turn can start.
    expect(await ok(e.client, 'session.interrupt', { session_id: e.session_id })).toEqual({
      session_id: e.session_id,
      status: 'not_interrupted',
      interrupted: false,
      turn_interrupted: false,
      stopped: [],
    });
    e.router.parent.push(answer('fresh start'));
    const t2 = await e.submit('again');
    expect((await e.completeOf(t2)).text).toBe('fresh start');
    e.checkEvents();
  });

  it('a steer taken into a call that is then interrupted comes back as missed_steer', async () => {
    const e = await env();
    const hold = deferred();
    e.router.parent.push(
      { ...callTools([{ name: 'echo', args: { text: 'x' }, id: 'p1' }]), gates: { 0: hold.promise } },
      {
        chunks: [textChunk('on it')],
        hang: true,
      },
    );
    const turn = await e.submit('work');
    await model.waitForRequests(1);
    await ok(e.client, 'session.steer', { session_id: e.session_id, text: 'switch to plan B' });
    hold.resolve();
    await e.client.waitForEvent((x) => x.type === 'message.delta' && x.payload.text === 'on it');
    expect(e.router.parentRequests[1]?.body.messages.at(-1)).toEqual({ role: 'user', content: steerText('switch to plan B') });
    await ok(e.client, 'session.interrupt', { session_id: e.session_id });
    const done = await e.completeOf(turn);
    expect(done).toMatchObject({ status: 'interrupted', missed_steer: 'switch to plan B' });
    expect(String(done.error)).toContain('[steer did not land before the subagent stopped: switch to plan B]');
    expect(e.client.events.filter((x) => x.type === 'session.steer.delivered')).toEqual([]);
    e.checkEvents();
  });
});

// ---- a server without a model; agent kinds ----

describe('parent agent: configuration', () => {
  it('a server without a model answers prompt.submit with 4014', async () => {
    const server = new RpcServer({ max_spawn_depth: 2 });
    servers.push(server);
    const { client } = connectMemory(server);
    const { session_id } = await ok(client, 'session.create', {});
    const err = await fails(client, 'prompt.submit', { session_id, text: 'hello' });
    expect(err.code).toBe(RpcCode.NoModel);
    expect(err.code).toBe(4014);
    expect(err.message).toContain('--base-url');
    expect(model.requests).toHaveLength(0);
  });

  it('agent {kind: "openai"} on a server without a model is -32602 naming the configuration', async () => {
    const server = new RpcServer();
    servers.push(server);
    const { client } = connectMemory(server);
    const { session_id } = await ok(client, 'session.create', {});
    const err = await fails(client, 'delegation.spawn', { session_id, tasks: [{ goal: 'g', agent: { kind: 'openai' } }] });
    expect(err.code).toBe(-32602);
    const issues = (err.data as { issues: Array<{ path: string; message: string }> }).issues;
    expect(issues).toEqual([expect.objectContaining({ path: 'tasks.0.agent.kind' })]);
    expect(issues[0]?.message).toContain('--base-url and --model');
    expect(err.message).toContain('not configured');
    expect(client.events.filter((x) => x.type === 'subagent.spawn_requested')).toEqual([]);
  });

  it('agent {kind: "openai", model} on a server with a model runs the child on that model', async () => {
    const e = await env();
    e.router.child('host task', answer('done by other'));
    const r = await ok(e.client, 'delegation.spawn', {
      session_id: e.session_id,
      tasks: [{ goal: 'host task', agent: { kind: 'openai', model: 'other-model' } }],
    });
    const id = r.subagent_ids[0] as string;
    const entry = wireEntry((await e.client.waitForEvent(isEvent('subagent.complete', id))).payload) as unknown as CompletionEntry;
    expect(entry).toMatchObject({ status: 'completed', summary: 'done by other', model: 'other-model' });
    expect(e.router.childRequests.get('host task')?.[0]?.body.model).toBe('other-model');
    const snap = await ok(e.client, 'subagent.list', { session_id: e.session_id, include_finished: true });
    expect(snap.subagents.find((s) => s.subagent_id === id)?.model).toBe('other-model');
    const bad = await fails(e.client, 'delegation.spawn', { session_id: e.session_id, tasks: [{ goal: 'g', agent: { kind: 'openai', temperature: 2 } }] });
    expect(bad.code).toBe(-32602);
    e.checkEvents();
  });
});
