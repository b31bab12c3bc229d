// The end of `serve --mcp`, read on the wire (every stdout line, in order): the host closing stdin
// (or SIGTERM) with children running takes the shutdown path of `serve --stdio`. The waiting call
// is answered with its children's entries, each completion's progress and log message come
// before that answer and nothing after it, stdout carries MCP alone, and the process exits 0.
import { afterAll, describe, expect, it } from 'vitest';
import { killAll, spawnSubrun, type Proc } from '../helpers/process.ts';
import { hanging } from './harness.ts';

afterAll(async () => {
  await killAll();
});

type Line = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function send(proc: Proc, msg: Record<string, unknown>): void {
  proc.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...msg })}\n`);
}

async function started(): Promise<Proc> {
  const proc = spawnSubrun(['serve', '--mcp']);
  send(proc, { id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'wire', version: '1' } } });
  await proc.stdout.take((l) => (JSON.parse(l) as Line).id === 0);
  send(proc, { method: 'notifications/initialized' });
  // Two hanging children, waited on with a progress token; both started before the end.
  const args = { tasks: [hanging('a'), hanging('b')], wait: true, wait_seconds: 600 };
  send(proc, { id: 1, method: 'tools/call', params: { name: 'delegate', arguments: args, _meta: { progressToken: 'p1' } } });
  for (let i = 0; i < 2; i++) await proc.stdout.take((l) => (JSON.parse(l) as Line).params?._meta?.subrun?.event === 'started');
  return proc;
}

async function judge(proc: Proc): Promise<void> {
  const exit = await proc.waitExit();
  expect(exit, proc.stderr.all.join('\n')).toEqual({ code: 0, signal: null });
  const lines: Line[] = proc.stdout.all.map((l) => JSON.parse(l) as Line);
  for (const l of lines) expect(l.jsonrpc).toBe('2.0');
  const answerAt = lines.findIndex((l) => l.id === 1);
  expect(answerAt).toBeGreaterThan(0);
  const answer = lines[answerAt] as Line;
  expect(answer.result.structuredContent).toMatchObject({ count: 2, done: true });
  expect(answer.result.structuredContent.results.map((e: Line) => e.status)).toEqual(['interrupted', 'interrupted']);
  const completions = lines.filter((l) => l.method === 'notifications/progress' && l.params._meta.subrun.event === 'interrupted');
  expect(completions).toHaveLength(2);
  for (const c of completions) expect(lines.indexOf(c)).toBeLessThan(answerAt);
  // Numbered 1, 2, 3, ... on the wire, none after the answer.
  const progress = lines.filter((l) => l.method === 'notifications/progress').map((l) => l.params.progress as number);
  expect(progress).toEqual(progress.map((_, i) => i + 1));
  expect(lines.slice(answerAt + 1).some((l) => l.method === 'notifications/progress')).toBe(false);
  const logs = lines.filter((l) => l.method === 'notifications/message' && l.params.data.event === 'subagent.complete');
  expect(logs.map((l) => l.params.level)).toEqual(['warning', 'warning']);
}

describe('serve --mcp: the shutdown path', () => {
  it('stdin EOF with children running: the waiting call gets every entry, then exit 0', async () => {
    const proc = await started();
    proc.child.stdin.end();
    await judge(proc);
  });

  it('SIGTERM takes the same path', async () => {
    const proc = await started();
    proc.child.kill('SIGTERM');
    await judge(proc);
  });

  it('a line that is not JSON, or not MCP, is answered or dropped, and the server answers on', async () => {
    const proc = spawnSubrun(['serve', '--mcp']);
    proc.child.stdin.write('this is not json\n');
    send(proc, { id: 'x', method: 'tools/list' });
    send(proc, { id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'wire', version: '1' } } });
    await proc.stdout.take((l) => (JSON.parse(l) as Line).id === 0);
    send(proc, { id: 2, method: 'ping' });
    expect(JSON.parse(await proc.stdout.take((l) => (JSON.parse(l) as Line).id === 2))).toEqual({ jsonrpc: '2.0', id: 2, result: {} });
    proc.child.stdin.end();
    expect(await proc.waitExit()).toEqual({ code: 0, signal: null });
  });
});
