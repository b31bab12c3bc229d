// What a hostile or careless IDE can send `subrun serve --acp`, over a real stdio pipe to the real
// process: a steer whose text is nested 20,000 deep, a line of 40 MiB, a regular file as a cwd.
// Each is answered (-32602, -32600, -32602) and the adapter serves on; at stdin's EOF it exits 0
// with nothing uncaught on stderr.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as acp from '@agentclientprotocol/sdk/unstable';
import { killAll } from '../helpers/process.ts';
import { expectNoStray, FakeModel, responseTo, ROOT, Router, startAcp, type AcpServer } from './harness.ts';

let model: FakeModel;

beforeEach(async () => {
  model = await FakeModel.start();
  new Router(model);
});

afterEach(async () => {
  await killAll();
  await model.close();
});

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

/** Closes stdin and expects a clean exit: code 0, nothing uncaught or unhandled on stderr. */
async function endsCleanly(s: AcpServer): Promise<void> {
  s.proc.child.stdin.end();
  expect(await s.proc.waitExit()).toStrictEqual({ code: 0, signal: null });
  await s.proc.stderr.whenEnded();
  const stderr = s.proc.stderr.all.join('\n');
  expect(stderr).not.toMatch(/Uncaught|unhandled|RpcError|at .*\.js:\d+/i);
  expect(expectNoStray(s)).toEqual([]);
}

describe('serve --acp at its edges', () => {
  it('a _subrun/steer whose text is nested 20,000 deep is -32602, and stdin EOF then exits 0', async () => {
    const s = startAcp(model.url);
    await s.initialize(true);
    const sid = await s.newSession();
    const params = (text: string) => `{"sessionId":"${sid}","subagentId":"sa_nope","text":${text}}`;
    s.raw(`{"jsonrpc":"2.0","id":"deep","method":"_subrun/steer","params":${params(nested(20_000))}}\n`);
    s.raw(`{"jsonrpc":"2.0","id":"object","method":"_subrun/steer","params":${params(`{"a":${nested(20_000)}}`)}}\n`);
    s.raw(`{"jsonrpc":"2.0","id":"number","method":"_subrun/steer","params":${params('7')}}\n`);
    for (const id of ['deep', 'object', 'number']) {
      const answer = await s.until(responseTo(id), `the answer to ${id}`);
      expect(answer.error?.code, JSON.stringify(answer).slice(0, 300)).toBe(-32602);
    }
    // The adapter serves on.
    const list = await s.conn.agent.request<{ subagents: unknown[] }>('_subrun/list', { sessionId: sid });
    expect(list.subagents).toEqual([]);
    await endsCleanly(s);
  });

  it('a 40 MiB line is refused as it streams with one -32600 (id null), and the stream goes on', { timeout: 60_000 }, async () => {
    const s = startAcp(model.url);
    await s.initialize(true);
    const big = `{"jsonrpc":"2.0","id":"big","method":"_subrun/list","params":{"sessionId":"${'x'.repeat(40 << 20)}"}}\n`;
    // Written whole before anything else is sent (the pipe took it: the server read it through).
    await new Promise<void>((resolve) => s.proc.child.stdin.write(big, () => resolve()));
    const refusal = await s.until((m) => m.error?.code === -32600, 'the refusal of the long line');
    expect(refusal).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    // The next line is served, on the same connection.
    const sid = await s.newSession();
    expect(sid).toMatch(/^ses_/);
    expect(s.wire.filter((m) => m.error?.code === -32600)).toHaveLength(1);
    expect(s.wire.some(responseTo('big'))).toBe(false);
    await endsCleanly(s);
  });

  it('--max-message-bytes applies: a line just over it is refused, one at it is served', async () => {
    const s = startAcp(model.url, ['--max-message-bytes', '4096']);
    await s.initialize(true);
    const line = (id: string, size: number) => {
      const head = `{"jsonrpc":"2.0","id":"${id}","method":"_subrun/list","params":{"sessionId":"`;
      const tail = '"}}';
      return `${head}${'y'.repeat(size - head.length - tail.length)}${tail}`;
    };
    s.raw(`${line('at', 4096)}\n`);
    expect((await s.until(responseTo('at'), 'the answer at the bound')).error?.code).not.toBe(-32600);
    s.raw(`${line('over', 4097)}\n`);
    expect(await s.until((m) => m.error?.code === -32600, 'the refusal over the bound')).toMatchObject({ id: null });
    expect(s.wire.some(responseTo('over'))).toBe(false);
    await endsCleanly(s);
  });

  it('session/new refuses a regular file as cwd (-32602), inside the roots', async () => {
    // Inside the workspace root (the package's directory), so only its kind can refuse it.
    const dir = mkdtempSync(join(ROOT, '.acp-cwd-'));
    try {
      const file = join(dir, 'file.txt');
      writeFileSync(file, 'not a directory\n');
      const s = startAcp(model.url);
      await s.initialize(true);
      const err = await s.newSession(file).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(acp.RequestError);
      expect(err).toMatchObject({ code: -32602, data: { cwd: file } });
      expect(await s.newSession(dir)).toMatch(/^ses_/);
      await endsCleanly(s);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
