// The ACP session mapping in-process, on a real RpcServer and the adapter's link, for the one
// order the process tests cannot force: a child that takes longer to stop than the parent turn.
// The cancelled prompt must still be answered only after that child's terminal update.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionUpdate } from '@agentclientprotocol/sdk/unstable';
import { RpcLink, type RpcEvent } from '../../src/rpc/link.ts';
import { AcpSession } from '../../src/acp/session.ts';
import type { Runner } from '../../src/types.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcServer } from '../../src/server.ts';
import { FakeModel } from '../helpers/fake-model.ts';
import { deferred } from './harness.ts';

let model: FakeModel;
let server: RpcServer;

beforeEach(async () => {
  model = await FakeModel.start();
  server = new RpcServer({ openai: { endpoint: { base_url: model.url, model: 'fake', max_retries: 0 } } });
});

afterEach(async () => {
  await server.shutdown();
  await model.close();
});

/** A macrotask: every microtask queued so far (and what they queue) has run. */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

describe.each([true, false])('AcpSession (subagents: %s)', (visible) => {
  it('answers a cancelled prompt only after a slow-to-stop child is terminal', async () => {
    const log: string[] = [];
    const parentEnded = deferred();
    const made: AcpSession[] = [];
    const link = new RpcLink(server, (e: RpcEvent) => {
      made[0]?.onEvent(e);
      if (e.type === 'message.complete') parentEnded.resolve();
    });
    const { session_id } = await link.call('session.create', {});
    const send = (sid: string, u: SessionUpdate) => {
      const state = u.sessionUpdate === 'subagent_update' ? u.state : undefined;
      if ((state && state.state === 'idle') || (u.sessionUpdate === 'tool_call_update' && (u.status === 'failed' || u.status === 'completed')))
        log.push(`terminal ${sid}`);
    };
    const session = new AcpSession(session_id, visible, link, send, silentLogger);
    made.push(session);

    // The parent's model call never answers; a child of the session stops only when released.
    model.reply({ chunks: [], hang: true });
    const release = deferred();
    const stubborn: Runner = {
      model: 'stubborn',
      async run(ctx) {
        await new Promise<void>((resolve) => (ctx.signal.aborted ? resolve() : ctx.signal.addEventListener('abort', () => resolve(), { once: true })));
        await release.promise;
        return { status: 'interrupted' };
      },
    };
    const prompt = session.prompt(1, 'go').then((r) => {
      log.push(`answer ${r.stopReason}`);
      return r;
    });
    await model.waitForRequests(1);
    server.runtime.delegate([{ goal: 'slow', runner: stubborn }], { owner: { session_id, transport: 'test', generation: 1 } });

    session.registerTurn(1);
    session.cancel();
    await parentEnded.promise;
    await settled();
    // The parent turn is over, its child is not: no answer yet.
    expect(log).toEqual([]);
    release.resolve();
    expect(await prompt).toEqual({ stopReason: 'cancelled' });
    expect(log).toEqual([`terminal ${session_id}`, 'answer cancelled']);
    link.close();
  });

  it('holds no child once its terminal update was sent: 50 finished children leave nothing behind', async () => {
    const link = new RpcLink(server, (e: RpcEvent) => session.onEvent(e));
    const { session_id } = await link.call('session.create', {});
    const done = deferred();
    const terminals: string[] = [];
    const send = (_sid: string, u: SessionUpdate) => {
      if (u.sessionUpdate === 'subagent_update' && u.state?.state === 'idle') terminals.push(u.sessionId);
      else if (u.sessionUpdate === 'tool_call_update' && u.status === 'completed') terminals.push(u.toolCallId);
      if (terminals.length === 50) done.resolve();
    };
    const session = new AcpSession(session_id, visible, link, send, silentLogger);
    const quick: Runner = { model: 'quick', run: async () => ({ status: 'completed', summary: 'done' }) };
    const owner = { owner: { session_id, transport: 'test', generation: 1 } };
    for (let i = 0; i < 25; i++)
      server.runtime.delegate(
        Array.from({ length: 2 }, (_, j) => ({ goal: `task ${i}.${j}`, runner: quick })),
        owner,
      );
    await done.promise;
    expect(new Set(terminals).size).toBe(50);
    expect(session.held()).toEqual({ children: 0, turns: 0, ends: 0 });
    // Delegated in batches of two (the default concurrency caps a batch at three).
    // A finished child's id is no child of the session any more: a cancel on it goes nowhere.
    expect(terminals.some((id) => session.ownsChild(id))).toBe(false);
    link.close();
  });
});
