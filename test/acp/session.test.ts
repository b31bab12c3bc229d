// The ACP session mapping in-process, on a real RpcServer and the adapter's link, for the one
// order the process tests cannot force: a child that takes longer to stop than the parent turn.
// The cancelled prompt must still be answered only after that child's terminal update.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionUpdate } from '@agentclientprotocol/sdk/unstable';
import { RpcLink, type RpcEvent } from '../../src/acp/rpc-link.ts';
import { AcpSession } from '../../src/acp/session.ts';
import type { Runner } from '../../src/delegation/types.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcServer } from '../../src/rpc/server.ts';
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
    const { session_id } = await link.call<{ session_id: string }>('session.create', {});
    const send = (sid: string, u: SessionUpdate) => {
      const state = u.sessionUpdate === 'subagent_update' ? u.state : undefined;
      if ((state && state.state === 'idle') || (u.sessionUpdate === 'tool_call_update' && (u.status === 'failed' || u.status === 'completed'))) log.push(`terminal ${sid}`);
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
});
