// `subrun serve --acp` as an IDE runs it: the official SDK's client over a real stdio pipe to the
// real process, whose parent agent (on a local fake OpenAI-compatible streaming server) delegates
// two children. Each case of the design's list, with and without the client's `subagents`
// capability. Order is read off the raw wire; every wait is on a wire message or an exit.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as acp from '@agentclientprotocol/sdk/unstable';
import { completionEntrySchema, resultSchemas } from '../../src/contract/wire.ts';
import { VERSION } from '../../src/version.ts';
import { callTools, finishChunk, reasoningChunk, textChunk, toolCallChunk, usageChunk, type ScriptedReply } from '../helpers/fake-model.ts';
import { killAll } from '../helpers/process.ts';
import {
  deferred,
  expectNoStray,
  FakeModel,
  isAnnounce,
  isCallDone,
  isChildCall,
  isTerminal,
  isUpdate,
  mentions,
  responseTo,
  ROOT,
  Router,
  startAcp,
  update,
  zSessionNotification,
  type AcpServer,
  type WireMsg,
} from './harness.ts';

const A = 'read the spec';
const B = 'draft a summary';

/** The parent's first reply: a thought, a few words, then delegate_task with both goals. */
const delegateBoth: ScriptedReply = {
  chunks: [
    reasoningChunk('two independent parts'),
    textChunk('Delegating. '),
    toolCallChunk(0, 'call_d', 'delegate_task', JSON.stringify({ tasks: [{ goal: A }, { goal: B }] })),
    finishChunk('tool_calls'),
    usageChunk(10, 5),
  ],
};
const say = (text: string): ScriptedReply => ({ chunks: [reasoningChunk(`thinking about ${text}`), textChunk(text), finishChunk('stop'), usageChunk(3, 2)] });
const hang: ScriptedReply = { chunks: [], hang: true };
const gated = (reply: ScriptedReply, gate: Promise<unknown>): ScriptedReply => ({ ...reply, gates: { 0: gate } });

let model: FakeModel;
let router: Router;

beforeEach(async () => {
  model = await FakeModel.start();
  router = new Router(model);
});

afterEach(async () => {
  await killAll();
  await model.close();
});

/** A started server, initialized, with one session. */
async function open(subagents: boolean, extra: readonly string[] = []): Promise<{ s: AcpServer; sid: string }> {
  const s = startAcp(model.url, extra);
  await s.initialize(subagents);
  return { s, sid: await s.newSession() };
}

/** The id of the child with this goal, from its announcement (or its tool call). */
async function childId(s: AcpServer, goal: string, subagents: boolean): Promise<string> {
  const m = await s.until(subagents ? isAnnounce(goal) : isChildCall(goal), `the announcement of ${goal}`);
  const u = update(m) as WireMsg;
  return (subagents ? u.sessionId : u.toolCallId) as string;
}

/** The child's terminal message: its idle subagent_update, or the end of its tool call. */
const childDone = (id: string, subagents: boolean) => (subagents ? isTerminal(id) : isCallDone(id));
const index = (s: AcpServer, pred: (m: WireMsg) => boolean) => s.wire.findIndex(pred);

describe('initialize and session/new', () => {
  it('answers with subrun, protocol 1, text-only prompts and no auth; a cwd outside the roots is -32602 naming them', async () => {
    const s = startAcp(model.url);
    // Before initialize, the SDK's gate refuses everything else.
    const early = await s.conn.agent.request(acp.methods.agent.session.new, { cwd: ROOT, mcpServers: [] }).catch((e: unknown) => e);
    expect(early).toMatchObject({ code: -32600 });

    const init = await s.initialize(true);
    expect(init).toMatchObject({
      protocolVersion: 1,
      agentInfo: { name: 'subrun', version: VERSION },
      authMethods: [],
      agentCapabilities: { promptCapabilities: { image: false, audio: false } },
    });
    expect(await s.newSession()).toMatch(/^ses_/);
    for (const cwd of ['/', 'relative/dir', `${ROOT}/no-such-dir`]) {
      const err = await s.newSession(cwd).catch((e: unknown) => e as acp.RequestError);
      expect(err).toBeInstanceOf(acp.RequestError);
      expect((err as acp.RequestError).code).toBe(-32602);
      expect((err as acp.RequestError).data).toMatchObject({ cwd, allowedRoots: [ROOT.replace(/\/$/, '')] });
    }
    const noMcp = await s.conn.agent.request(acp.methods.agent.session.new, { cwd: ROOT } as never).catch((e: unknown) => e);
    expect(noMcp).toMatchObject({ code: -32602 });
    expect(expectNoStray(s)).toEqual([]);
  });
});

describe.each([
  ['with the subagents capability', true],
  ['without the subagents capability', false],
])('%s', (_name, subagents) => {
  it('a prompt that delegates two children: parent text, thought and tool call stream; each child announced before its traffic; end_turn', async () => {
    router.parent.push(delegateBoth);
    router.child(A, say('A done'));
    router.child(
      B,
      {
        chunks: [toolCallChunk(0, 'r1', 'read_file', JSON.stringify({ path: 'package.json', limit: 3 })), finishChunk('tool_calls'), usageChunk(2, 2)],
      },
      say('B done'),
    );
    const { s, sid } = await open(subagents);
    expect(await s.prompt(sid, 'split the work')).toEqual({ stopReason: 'end_turn' });
    const a = await childId(s, A, subagents);
    const b = await childId(s, B, subagents);
    await s.until(childDone(a, subagents), 'A terminal');
    await s.until(childDone(b, subagents), 'B terminal');

    // The parent's own turn.
    expect(
      index(
        s,
        isUpdate(sid, 'agent_thought_chunk', (u) => u.content.text === 'two independent parts'),
      ),
    ).toBeGreaterThanOrEqual(0);
    expect(
      index(
        s,
        isUpdate(sid, 'agent_message_chunk', (u) => u.content.text === 'Delegating. '),
      ),
    ).toBeGreaterThanOrEqual(0);
    const call = s.wire.find(isUpdate(sid, 'tool_call', (u) => u.title === 'delegate_task')) as WireMsg;
    expect(update(call)).toMatchObject({ kind: 'think', status: 'in_progress' });
    expect(
      index(
        s,
        isUpdate(sid, 'tool_call_update', (u) => u.toolCallId === update(call)?.toolCallId && u.status === 'completed'),
      ),
    ).toBeGreaterThan(s.wire.indexOf(call));

    for (const [id, goal] of [
      [a, A],
      [b, B],
    ] as const) {
      const first = s.wire.find(mentions(id)) as WireMsg;
      if (subagents) {
        // The announcement: on the parent session, the child's id, its goal, cancellable.
        expect(first.params.sessionId).toBe(sid);
        expect(update(first)).toEqual({
          sessionUpdate: 'subagent_update',
          sessionId: id,
          title: goal,
          description: expect.any(String),
          capabilities: { cancel: {} },
        });
        const term = update(s.wire.find(isTerminal(id)) as WireMsg) as WireMsg;
        expect(term.state).toEqual({ state: 'idle', stopReason: 'end_turn' });
        expect(completionEntrySchema.parse(term._meta.subrun)).toMatchObject({ subagent_id: id, status: 'completed' });
        expect(
          index(
            s,
            isUpdate(sid, 'subagent_update', (u) => u.sessionId === id && u.state?.state === 'running'),
          ),
        ).toBeGreaterThan(s.wire.indexOf(first));
      } else {
        expect(first.params.sessionId).toBe(sid);
        expect(update(first)).toMatchObject({ sessionUpdate: 'tool_call', toolCallId: id, kind: 'think', title: goal });
        const done = update(s.wire.find(isCallDone(id)) as WireMsg) as WireMsg;
        expect(done.status).toBe('completed');
        expect(completionEntrySchema.parse(done.rawOutput)).toMatchObject({ subagent_id: id, status: 'completed' });
      }
    }
    if (subagents) {
      // The children's own traffic, on their own session ids.
      expect(
        index(
          s,
          isUpdate(a, 'agent_message_chunk', (u) => u.content.text === 'A done'),
        ),
      ).toBeGreaterThan(index(s, mentions(a)));
      expect(
        index(
          s,
          isUpdate(a, 'agent_thought_chunk', (u) => u.content.text === 'thinking about A done'),
        ),
      ).toBeGreaterThan(index(s, mentions(a)));
      const tool = s.wire.find(isUpdate(b, 'tool_call', (u) => u.title === 'read_file')) as WireMsg;
      expect(update(tool)).toMatchObject({ kind: 'read', status: 'in_progress' });
      expect(
        index(
          s,
          isUpdate(b, 'tool_call_update', (u) => u.toolCallId === update(tool)?.toolCallId && u.status === 'completed'),
        ),
      ).toBeGreaterThan(s.wire.indexOf(tool));
      // The SDK's client accepted every subagent_update (a malformed one would never reach it).
      expect(s.updates.filter((n) => n.update.sessionUpdate === 'subagent_update').length).toBe(
        s.wire.filter((m) => update(m)?.sessionUpdate === 'subagent_update').length,
      );
    } else {
      // Nothing names a child session, and no subagent_update reaches a client that cannot read it.
      expect(s.wire.filter((m) => update(m)?.sessionUpdate === 'subagent_update')).toEqual([]);
      expect(s.wire.filter((m) => m.params?.sessionId === a || m.params?.sessionId === b)).toEqual([]);
    }
    // Every update is in the exact form the SDK's client parser keeps whole (nothing stripped).
    for (const m of s.wire.filter((x) => x.method === 'session/update')) expect(zSessionNotification.parse(m.params)).toEqual(m.params);
    expect(expectNoStray(s)).toEqual([]);
  });

  it('session/cancel on one child stops it alone; its sibling and the parent turn go on to end_turn', async () => {
    const aCancelled = deferred();
    router.parent.push(delegateBoth);
    router.child(A, hang);
    router.child(B, gated(say('B done'), aCancelled.promise));
    const { s, sid } = await open(subagents);
    const p = s.prompt(sid, 'split the work');
    const a = await childId(s, A, subagents);
    const b = await childId(s, B, subagents);
    await s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: a });
    const term = update(await s.until(childDone(a, subagents), 'A terminal')) as WireMsg;
    if (subagents) {
      expect(term.state).toEqual({ state: 'idle', stopReason: 'cancelled' });
      expect(term._meta.subrun).toMatchObject({ status: 'interrupted' });
    } else {
      expect(term).toMatchObject({ status: 'failed', rawOutput: { status: 'interrupted' } });
    }
    aCancelled.resolve();
    expect(await p).toEqual({ stopReason: 'end_turn' });
    const bDone = update(await s.until(childDone(b, subagents), 'B terminal')) as WireMsg;
    expect(subagents ? bDone.state : bDone.status).toEqual(subagents ? { state: 'idle', stopReason: 'end_turn' } : 'completed');
  });

  it('_subrun/steer reaches the child and its delivery is echoed; its errors are subrun codes; _subrun/list and _subrun/tail answer in the JSON-RPC shapes', async () => {
    const steered = deferred();
    router.parent.push(delegateBoth);
    // A is held until the steer is queued; its next model call carries it.
    router.child(
      A,
      gated({ chunks: [toolCallChunk(0, 'r1', 'list_dir', '{"path":"."}'), finishChunk('tool_calls'), usageChunk(1, 1)] }, steered.promise),
      say('A steered'),
    );
    router.child(B, hang);
    const { s, sid } = await open(subagents, ['--max-queued-steers', '1']);
    const p = s.prompt(sid, 'split the work');
    const a = await childId(s, A, subagents);
    const b = await childId(s, B, subagents);
    await s.until(
      subagents
        ? isUpdate(sid, 'subagent_update', (u) => u.sessionId === a && u.state?.state === 'running')
        : isUpdate(sid, 'tool_call_update', (u) => u.toolCallId === a && u.status === 'in_progress'),
      'A running',
    );

    const r = await s.conn.agent.request<Record<string, unknown>>('_subrun/steer', { sessionId: sid, subagentId: a, text: 'focus on section 5' });
    expect(r).toMatchObject({ status: 'queued', steer_id: expect.stringMatching(/^st_/) });
    steered.resolve();
    const echo = subagents
      ? await s.until(
          isUpdate(a, 'user_message_chunk', (u) => u.content.text === 'focus on section 5'),
          'the steer echo',
        )
      : await s.until(
          isUpdate(sid, 'tool_call_update', (u) => u.toolCallId === a && u.content?.[0]?.content?.text === 'steer delivered: focus on section 5'),
          'the steer echo',
        );
    expect(echo).toBeDefined();
    // The model got it in A's next request.
    expect(JSON.stringify(router.childRequests.get(A)?.[1]?.body.messages)).toContain('focus on section 5');

    const code = (params: unknown) =>
      s.conn.agent.request('_subrun/steer', params).then(
        () => 'answered',
        (e: acp.RequestError) => e.code,
      );
    expect(await code({ sessionId: sid, text: 'x' })).toBe(4000);
    expect(await code({ sessionId: sid, subagentId: b, text: '   ' })).toBe(4002);
    expect(await code({ sessionId: sid, subagentId: b, text: 'x'.repeat(40_000) })).toBe(4003);
    expect(await code({ sessionId: 'ses_not_mine', subagentId: b, text: 'x' })).toBe(4001);
    expect(await code('not an object')).toBe(-32602);
    // B never reaches a delivery point: one steer queues, the next finds the queue full.
    expect(await s.conn.agent.request('_subrun/steer', { sessionId: sid, subagentId: b, text: 'one' })).toMatchObject({ status: 'queued' });
    expect(await code({ sessionId: sid, subagentId: b, text: 'two' })).toBe(4005);

    const list = resultSchemas['subagent.list'].parse(await s.conn.agent.request('_subrun/list', { sessionId: sid, includeFinished: true }));
    expect(list.subagents.map((x) => x.subagent_id).sort()).toEqual([a, b].sort());
    const tail = resultSchemas['subagent.tail'].parse(await s.conn.agent.request('_subrun/tail', { sessionId: sid, subagentId: a }));
    expect(tail).toMatchObject({ subagent_id: a, available: true });
    expect(tail.text).toContain('A steered');
    expect(await s.conn.agent.request('_subrun/tail', { sessionId: 'ses_not_mine', subagentId: a }).catch((e: acp.RequestError) => e.code)).toBe(4001);
    // A refused steer says why, as on every surface: A finished (it is known: not "not found").
    await s.until(childDone(a, subagents), 'A terminal');
    expect(await s.conn.agent.request('_subrun/steer', { sessionId: sid, subagentId: a, text: 'late' })).toEqual({
      status: 'rejected',
      subagent_id: a,
      text: 'late',
      reason: 'finished',
    });
    expect(await s.conn.agent.request('_subrun/steer', { sessionId: sid, subagentId: 'sa_nobody', text: 'late' })).toMatchObject({ reason: 'not_found' });

    await s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    expect(await p).toEqual({ stopReason: 'cancelled' });
  });

  it('session/cancel on the parent: the turn answers cancelled after every child is terminal', async () => {
    router.parent.push(delegateBoth);
    router.child(A, hang);
    router.child(B, hang);
    const { s, sid } = await open(subagents);
    const p = s.prompt(sid, 'split the work');
    const a = await childId(s, A, subagents);
    const b = await childId(s, B, subagents);
    await Promise.all([model.waitForRequests(3)]);
    await s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    expect(await p).toEqual({ stopReason: 'cancelled' });
    const answer = s.wire.findIndex((m) => m.result?.stopReason === 'cancelled');
    for (const id of [a, b]) {
      const at = index(s, childDone(id, subagents));
      expect(at, `${id} terminal before the answer`).toBeGreaterThanOrEqual(0);
      expect(at).toBeLessThan(answer);
      const term = update(s.wire[at] as WireMsg) as WireMsg;
      expect(subagents ? term.state : term.status).toEqual(subagents ? { state: 'idle', stopReason: 'cancelled' } : 'failed');
    }
  });

  it('stdin closed mid-turn: every child terminal, the prompt answered cancelled, exit 0, stdout only JSON lines', async () => {
    router.parent.push(delegateBoth);
    router.child(A, hang);
    router.child(B, hang);
    const { s, sid } = await open(subagents);
    const p = s.prompt(sid, 'split the work').catch((e: unknown) => e);
    const a = await childId(s, A, subagents);
    const b = await childId(s, B, subagents);
    s.proc.child.stdin.end();
    expect(await s.proc.waitExit()).toEqual({ code: 0, signal: null });
    await s.proc.stdout.whenEnded();
    const answer = s.wire.findIndex((m) => m.id !== undefined && m.result?.stopReason === 'cancelled');
    expect(answer).toBeGreaterThan(0);
    for (const id of [a, b]) {
      expect(index(s, childDone(id, subagents)), `${id} terminal`).toBeGreaterThanOrEqual(0);
      expect(index(s, childDone(id, subagents))).toBeLessThan(answer);
    }
    expect(await p).toEqual({ stopReason: 'cancelled' });
    expect(expectNoStray(s)).toEqual([]);
  });
});

describe('ordering, errors and stop reasons', () => {
  it('a cancel sent in the same tick as its prompt is never lost: cancelled', async () => {
    router.parent.push(delegateBoth);
    router.child(A, hang);
    router.child(B, hang);
    const { s, sid } = await open(true);
    const p = s.prompt(sid, 'split the work');
    void s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    expect(await p).toEqual({ stopReason: 'cancelled' });
    // The same, written as two raw lines in one write: the prompt is answered cancelled too.
    s.raw(
      `${JSON.stringify({ jsonrpc: '2.0', id: 'p2', method: 'session/prompt', params: { sessionId: sid, prompt: [{ type: 'text', text: 'again' }] } })}\n` +
        `${JSON.stringify({ jsonrpc: '2.0', method: 'session/cancel', params: { sessionId: sid } })}\n`,
    );
    expect((await s.until(responseTo('p2'), 'the raw prompt answer')).result).toEqual({ stopReason: 'cancelled' });
  });

  it('a prompt refused as malformed leaves no turn behind: a later cancel does not reach a valid prompt that reuses its id', async () => {
    const { s, sid } = await open(true);
    const line = (o: unknown) => `${JSON.stringify(o)}\n`;
    const prompt = (id: number, block: Record<string, unknown>) =>
      line({ jsonrpc: '2.0', id, method: 'session/prompt', params: { sessionId: sid, prompt: [block] } });
    const cancel = line({ jsonrpc: '2.0', method: 'session/cancel', params: { sessionId: sid } });
    const answerTo = (id: number) => s.until((m) => responseTo(id)(m) && 'result' in m, `the answer to prompt ${id}`);
    // The refusal is written before the cancel arrives.
    s.raw(prompt(7, { type: 'text' }));
    expect((await s.until(responseTo(7), 'the refusal of prompt 7')).error).toMatchObject({ code: -32602 });
    s.raw(cancel);
    s.raw(prompt(7, { type: 'text', text: 'hello' }));
    expect((await answerTo(7)).result).toEqual({ stopReason: 'end_turn' });
    // The cancel arrives before the refusal is written (one write): it dies with the refused prompt.
    s.raw(prompt(8, { type: 'text' }) + cancel);
    expect((await s.until(responseTo(8), 'the refusal of prompt 8')).error).toMatchObject({ code: -32602 });
    s.raw(prompt(8, { type: 'text', text: 'hello again' }));
    expect((await answerTo(8)).result).toEqual({ stopReason: 'end_turn' });
    expect(expectNoStray(s)).toEqual([]);
  });

  it('a finished child is let go: a cancel on its id (or an unknown one) goes nowhere, a prompt on it is -32002; the session goes on', async () => {
    router.parent.push(delegateBoth);
    router.child(A, say('A done'));
    router.child(B, hang);
    const { s, sid } = await open(true);
    const p = s.prompt(sid, 'split the work');
    const a = await childId(s, A, true);
    const b = await childId(s, B, true);
    await s.until(isTerminal(a), 'A terminal');
    const promptOn = (sessionId: string) =>
      s.conn.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hi' }] }).then(
        () => 'answered',
        (e: acp.RequestError) => e.code,
      );
    // A live child still cannot be prompted; a finished one is an unknown session.
    expect(await promptOn(b)).toBe(-32602);
    await s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: a });
    await s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: 'sa_no_such_child' });
    expect(await promptOn(a)).toBe(-32002);
    // The cancels touched neither the live child nor the turn: B is stopped by its own cancel.
    expect(s.wire.some(isTerminal(b))).toBe(false);
    await s.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: b });
    await s.until(isTerminal(b), 'B terminal');
    expect(await p).toEqual({ stopReason: 'end_turn' });
    expect(s.wire.filter((m) => m.id === null)).toEqual([]);
    expect(expectNoStray(s)).toEqual([]);
  });

  it('SIGTERM takes the same shutdown path: every child terminal, the prompt answered cancelled, exit 0', async () => {
    router.parent.push(delegateBoth);
    router.child(A, hang);
    router.child(B, hang);
    const { s, sid } = await open(true);
    const p = s.prompt(sid, 'split the work').catch((e: unknown) => e);
    const a = await childId(s, A, true);
    const b = await childId(s, B, true);
    s.proc.child.kill('SIGTERM');
    expect(await s.proc.waitExit()).toEqual({ code: 0, signal: null });
    const answer = s.wire.findIndex((m) => m.result?.stopReason === 'cancelled');
    expect(answer).toBeGreaterThan(0);
    for (const id of [a, b]) {
      expect(index(s, isTerminal(id)), `${id} terminal`).toBeGreaterThanOrEqual(0);
      expect(index(s, isTerminal(id))).toBeLessThan(answer);
    }
    expect(await p).toEqual({ stopReason: 'cancelled' });
    expect(expectNoStray(s)).toEqual([]);
  });

  it('malformed input is answered with JSON-RPC errors and the server goes on', async () => {
    const { s, sid } = await open(true);
    s.raw('this is not json\n');
    s.raw('[{"jsonrpc":"2.0","id":900,"method":"initialize"}]\n');
    s.raw('{"jsonrpc":"2.0","id":901,"method":"session/prompt","params":{"sessionId":1}}\n');
    s.raw('{"jsonrpc":"2.0","id":902,"method":"no/such"}\n');
    s.raw('{"jsonrpc":"2.0","id":903,"method":"_subrun/list","params":[1]}\n');
    s.raw('{"jsonrpc":"2.0","id":904,"method":"session/prompt","params":{"sessionId":"ses_nope","prompt":[]}}\n');
    s.raw('{"jsonrpc":"2.0","method":"session/cancel","params":{"bad":true}}\n');
    s.raw('42\n');
    const codeOf = async (id: number | null, code: number) => {
      const m = await s.until((x) => x.id === id && x.error?.code === code, `error ${code} for ${id}`);
      return m.error.code as number;
    };
    expect(await codeOf(null, -32700)).toBe(-32700);
    expect(await codeOf(null, -32600)).toBe(-32600);
    expect(await codeOf(901, -32602)).toBe(-32602);
    expect(await codeOf(902, -32601)).toBe(-32601);
    expect(await codeOf(903, -32602)).toBe(-32602);
    expect(await codeOf(904, -32002)).toBe(-32002);
    // Still serving: a real call answers, and the process is alive.
    expect(resultSchemas['subagent.list'].parse(await s.conn.agent.request('_subrun/list', { sessionId: sid }))).toEqual({ subagents: [], delegations: [] });
    expect(s.proc.child.exitCode).toBeNull();
    expect(expectNoStray(s)).toEqual([]);
  });

  it('a model failure is a JSON-RPC error with its message; the iteration limit is max_turn_requests', async () => {
    router.parent.push({ status: 400, body: JSON.stringify({ error: { message: 'model says no' } }) });
    const { s, sid } = await open(true, ['--max-iterations', '1']);
    const err = (await s.prompt(sid, 'hello').catch((e: unknown) => e)) as acp.RequestError;
    expect(err).toBeInstanceOf(acp.RequestError);
    expect(err.code).toBe(-32603);
    expect(err.message).toContain('model says no');
    router.parent.push(callTools([{ name: 'list_dir', args: { path: '.' } }]));
    expect(await s.prompt(sid, 'look around')).toEqual({ stopReason: 'max_turn_requests' });
  });
});
