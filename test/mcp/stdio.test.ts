// `subrun serve --mcp` judged by the SDK's own Client over a real stdio pipe: the tools and their
// schemas, delegate with wait and progress, the deadline, a cancelled wait with its children still
// running, steers delivered / missed / refused, a three-level subtree interrupt, resources and
// their updates, and bad input that changes nothing and ends nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { hanging, scriptedTask, startStdioHost, steerable, type Host, readJson } from './harness.ts';

let host: Host & { stderr: string[] };

beforeAll(async () => {
  host = await startStdioHost(['--max-spawn-depth', '3', '--max-concurrent-children', '8']);
});
afterAll(async () => {
  await host.close();
});

const TOOLS = ['delegate', 'delegation_result', 'list_subagents', 'tail_subagent', 'steer_subagent', 'interrupt_subagent'];

describe('serve --mcp: the session', () => {
  it('answers initialize as subrun, with instructions, resources that subscribe, and logging', () => {
    expect(host.client.getServerVersion()?.name).toBe('subrun');
    expect(host.client.getInstructions()).toContain('queued is accepted, not delivered');
    expect(host.client.getServerCapabilities()).toMatchObject({ resources: { subscribe: true, listChanged: true }, logging: {}, tools: {} });
  });

  it('lists six tools, each with a strict object input and an output schema that takes the success or the error form', async () => {
    const { tools } = await host.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOLS].sort());
    for (const t of tools) {
      expect(t.inputSchema.type, t.name).toBe('object');
      expect(t.inputSchema.additionalProperties, t.name).toBe(false);
      expect(t.outputSchema?.anyOf, t.name).toEqual(expect.arrayContaining([{ required: ['error'], maxProperties: 1 }]));
    }
    expect(tools.find((t) => t.name === 'interrupt_subagent')?.annotations?.destructiveHint).toBe(true);
    expect(tools.find((t) => t.name === 'list_subagents')?.annotations?.readOnlyHint).toBe(true);
  });

  it('subrun://session names the session and its key', async () => {
    const s = await readJson(host.client, 'subrun://session');
    expect(s).toMatchObject({ session_id: expect.stringMatching(/^ses_/), session_key: expect.any(String), generation: 1 });
  });
});

describe('serve --mcp: delegate', () => {
  it('answers at once with ids and done: false', async () => {
    const r = await host.tool('delegate', { tasks: [scriptedTask('quick', [{ op: 'finish', summary: 'ok' }])] });
    expect(r.isError).toBe(false);
    expect(r.sc).toMatchObject({ count: 1, done: false, results: [] });
    const later = await host.tool('delegation_result', { delegation_id: r.sc.delegation_id, wait_seconds: 30 });
    expect(later.sc).toMatchObject({ done: true, results: [{ subagent_id: r.sc.subagent_ids[0], status: 'completed', summary: 'ok' }] });
  });

  it('with wait: numbered progress per event of its children, each completion before the answer, which carries every entry', async () => {
    const progress: Array<{ progress: number; message?: string; _meta?: Record<string, any> }> = []; // eslint-disable-line @typescript-eslint/no-explicit-any
    const tasks = [
      scriptedTask('one', [
        { op: 'tool', name: 'read_file', ms: 20 },
        { op: 'finish', summary: 'one done' },
      ]),
      scriptedTask('two', [
        { op: 'tool', name: 'search', ms: 40 },
        { op: 'finish', summary: 'two done' },
      ]),
    ];
    const r = await host.client.callTool({ name: 'delegate', arguments: { tasks, wait: true, wait_seconds: 30 } }, CallToolResultSchema, {
      onprogress: (p) => progress.push(p),
    });
    const sc = r.structuredContent as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(sc).toMatchObject({ count: 2, done: true });
    expect(sc.results.map((e: { task_index: number; summary: string }) => [e.task_index, e.summary])).toEqual([
      [0, 'one done'],
      [1, 'two done'],
    ]);
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    // The 1.32.2 client drops a notification read in one chunk with its answer (typescript-sdk#2580):
    // what it hands over is a prefix of the numbered stream; the answer carries every entry anyway.
    expect(progress.some((p) => p._meta?.subrun?.event === 'started')).toBe(true);
    expect(progress.some((p) => p._meta?.subrun?.event === 'tool')).toBe(true);
    for (const p of progress) expect(p.message).toMatch(/^[0-2]\/2 done · sa_\w+ /);
    expect(CallToolResultSchema.parse(r).content.filter((c) => c.type === 'resource_link')).toHaveLength(2);
  });

  it('with wait, ends at wait_seconds with what there is (done: false); delegation_result has the rest later', async () => {
    const r = await host.tool('delegate', { tasks: [hanging('slow')], wait: true, wait_seconds: 1 });
    expect(r.sc).toMatchObject({ done: false, results: [] });
    const id = r.sc.subagent_ids[0] as string;
    const stop = await host.tool('interrupt_subagent', { subagent_id: id });
    expect(stop.sc).toMatchObject({ found: true, interrupted: [id] });
    const later = await host.tool('delegation_result', { delegation_id: r.sc.delegation_id, wait_seconds: 30 });
    expect(later.sc).toMatchObject({ done: true, results: [{ subagent_id: id, status: 'interrupted' }] });
  });

  it('a cancelled wait ends the wait alone: the children run on and their entries wait in delegation_result', async () => {
    const ac = new AbortController();
    const first = new Promise<void>((resolve) => {
      const call = host.client.callTool(
        { name: 'delegate', arguments: { tasks: [steerable('keeps running')], wait: true, wait_seconds: 60 } },
        CallToolResultSchema,
        {
          signal: ac.signal,
          onprogress: () => resolve(),
        },
      );
      void call.catch(() => undefined);
    });
    await first; // its start: the child runs
    ac.abort();
    const running = await host.tool('list_subagents', {});
    const child = running.sc.subagents.find((s: { goal: string }) => s.goal === 'keeps running');
    expect(child).toMatchObject({ status: 'running', accepting_steer: true });
    const steer = await host.tool('steer_subagent', { subagent_id: child.subagent_id, text: 'carry on' });
    expect(steer.sc).toMatchObject({ status: 'queued' });
    const done = await host.tool('delegation_result', { delegation_id: child.delegation_id, wait_seconds: 30 });
    expect(done.sc).toMatchObject({ done: true, results: [{ status: 'completed', summary: 'keeps running steered' }] });
  });
});

describe('serve --mcp: steer and interrupt', () => {
  it('a steer is queued, then delivered (a log message), and the child finishes with it', async () => {
    const d = await host.tool('delegate', { tasks: [steerable('listen')] });
    const id = d.sc.subagent_ids[0] as string;
    const s = await host.tool('steer_subagent', { subagent_id: id, text: '  focus on section 5  ' });
    expect(s.sc).toEqual({ status: 'queued', subagent_id: id, text: 'focus on section 5', steer_id: expect.any(String) });
    const delivered = await host.notes.take(
      (n) => n.method === 'notifications/message' && n.params.data?.event === 'subagent.steer.delivered' && n.params.data.subagent_id === id,
    );
    expect(delivered.params).toMatchObject({ level: 'info', logger: 'subrun', data: { steer_id: s.sc.steer_id, text: 'focus on section 5' } });
    const complete = await host.notes.take((n) => n.params.data?.event === 'subagent.complete' && n.params.data.subagent_id === id);
    expect(complete.params).toMatchObject({ level: 'info', data: { entry: { status: 'completed' } } });
  });

  it('a steer the child never takes comes back as missed_steer (a warning)', async () => {
    const d = await host.tool('delegate', { tasks: [hanging('deaf')] });
    const id = d.sc.subagent_ids[0] as string;
    expect((await host.tool('steer_subagent', { subagent_id: id, text: 'unheard' })).sc.status).toBe('queued');
    await host.tool('interrupt_subagent', { subagent_id: id });
    const done = await host.tool('delegation_result', { delegation_id: d.sc.delegation_id, wait_seconds: 30 });
    expect(done.sc.results[0]).toMatchObject({ status: 'interrupted', missed_steer: expect.stringContaining('unheard') });
    const log = await host.notes.take((n) => n.params.data?.event === 'subagent.complete' && n.params.data.subagent_id === id);
    expect(log.params.level).toBe('warning');
  });

  it('refuses: finished and unknown children are rejected with their reason; bad text is the RPC code as an error result', async () => {
    const d = await host.tool('delegate', { tasks: [scriptedTask('brief', [{ op: 'finish', summary: 'x' }])], wait: true });
    const id = d.sc.subagent_ids[0] as string;
    expect((await host.tool('steer_subagent', { subagent_id: id, text: 'late' })).sc).toEqual({
      status: 'rejected',
      subagent_id: id,
      text: 'late',
      reason: 'finished',
    });
    expect((await host.tool('steer_subagent', { subagent_id: 'sa_nobody', text: 'x' })).sc).toMatchObject({ status: 'rejected', reason: 'not_found' });
    const empty = await host.tool('steer_subagent', { subagent_id: id, text: '   ' });
    expect(empty).toEqual({ isError: true, sc: { error: { code: 4002, message: 'text is required' } } });
    const long = await host.tool('steer_subagent', { subagent_id: id, text: 'x'.repeat(33_000) });
    expect(long.sc.error.code).toBe(4003);
    expect((await host.tool('delegation_result', { delegation_id: 'dg_nope' })).sc.error.code).toBe(4004);
    expect((await host.tool('delegate', { tasks: [] })).sc.error.code).toBe(4000);
  });

  it('interrupts a three-level subtree, descendants first', async () => {
    const leaf = { goal: 'leaf', agent: { kind: 'scripted', steps: [{ op: 'hang' }] } };
    const mid = { goal: 'mid', agent: { kind: 'scripted', steps: [{ op: 'spawn', tasks: [leaf] }, { op: 'hang' }] } };
    const d = await host.tool('delegate', { tasks: [scriptedTask('top', [{ op: 'spawn', tasks: [mid] }, { op: 'hang' }])] });
    const top = d.sc.subagent_ids[0] as string;
    // Each new child is a resources/list_changed: three of this delegation's.
    for (let i = 0; i < 3; i++) await host.notes.take((n) => n.method === 'notifications/resources/list_changed');
    const list = await host.tool('list_subagents', {});
    const byGoal = (g: string) => list.sc.subagents.find((s: { goal: string }) => s.goal === g)?.subagent_id as string;
    const r = await host.tool('interrupt_subagent', { subagent_id: top });
    // What it stopped, descendants first ...
    expect(r.sc).toEqual({ found: true, subagent_id: top, interrupted: [byGoal('leaf'), byGoal('mid'), top] });
    // ... and they end in that order: no child completes before its own children.
    const ended: string[] = [];
    while (ended.length < 3) {
      const n = await host.notes.take((m) => m.params.data?.event === 'subagent.complete' && r.sc.interrupted.includes(m.params.data.subagent_id));
      ended.push(n.params.data.subagent_id as string);
    }
    expect(ended).toEqual([byGoal('leaf'), byGoal('mid'), top]);
    expect((await host.tool('interrupt_subagent', { subagent_id: 'sa_nobody' })).sc).toEqual({ found: false, subagent_id: 'sa_nobody', interrupted: [] });
  });
});

describe('serve --mcp: resources', () => {
  it('a subscribed child gets updates while it runs and once after it completed, when a read shows its entry', async () => {
    const d = await host.tool('delegate', { tasks: [steerable('watched')] });
    const id = d.sc.subagent_ids[0] as string;
    const { resources } = await host.client.listResources();
    const uri = resources.find((r) => r.name === id)?.uri as string;
    expect(uri).toMatch(new RegExp(`/subagents/${id}$`));
    expect(resources.some((r) => r.uri === `${uri}/tail`)).toBe(true);
    await host.client.subscribeResource({ uri });
    await host.tool('steer_subagent', { subagent_id: id, text: 'go' });
    await host.notes.take((n) => n.params.data?.event === 'subagent.complete' && n.params.data.subagent_id === id);
    await host.notes.take((n) => n.method === 'notifications/resources/updated' && n.params.uri === uri);
    const read = await readJson(host.client, uri);
    expect(read).toMatchObject({ snapshot: { subagent_id: id, status: 'completed' }, entry: { subagent_id: id, status: 'completed' } });
    await host.client.unsubscribeResource({ uri });
  });

  it('an unknown or foreign child URI is -32002, read or subscribe', async () => {
    const session = await readJson(host.client, 'subrun://session');
    for (const uri of [`subrun://sessions/${session.session_id}/subagents/sa_nobody`, 'subrun://sessions/ses_other/subagents/sa_x', 'subrun://nothing']) {
      await expect(host.client.readResource({ uri })).rejects.toMatchObject({ code: -32002 });
      await expect(host.client.subscribeResource({ uri })).rejects.toMatchObject({ code: -32002 });
    }
  });
});

describe('serve --mcp: bad input changes nothing and ends nothing', () => {
  it('an unknown tool, wrong types, unknown arguments and a 2 MB argument get clear errors; the server answers on', async () => {
    const before = (await host.tool('list_subagents', { include_finished: true })).sc.subagents.length as number;
    const unknown = await host.client.callTool({ name: 'no_such_tool', arguments: {} });
    expect(unknown.isError).toBe(true);
    expect(JSON.stringify(unknown.content)).toContain('no_such_tool');
    const wrong = await host.client.callTool({ name: 'delegate', arguments: { tasks: 'all of them' } });
    expect(wrong.isError).toBe(true);
    expect(JSON.stringify(wrong.content)).toContain('tasks');
    const extra = await host.client.callTool({ name: 'list_subagents', arguments: { everything: true } });
    expect(extra.isError).toBe(true);
    const big = await host.tool('delegate', { tasks: [{ goal: 'x'.repeat(2 * 1024 * 1024) }] });
    expect(big).toEqual({ isError: true, sc: { error: { code: -32600, message: 'arguments too large', data: { max_message_bytes: 1048576 } } } });
    await expect(host.client.request({ method: 'no/such/method', params: {} }, CallToolResultSchema)).rejects.toMatchObject({ code: -32601 });
    const after = (await host.tool('list_subagents', { include_finished: true })).sc.subagents.length as number;
    expect(after).toBe(before);
    expect(await host.client.ping()).toEqual({});
  });

  it('logging/setLevel filters the log messages: at warning, a clean completion is not sent, a missed steer is', async () => {
    await host.client.setLoggingLevel('warning');
    const clean = await host.tool('delegate', { tasks: [scriptedTask('clean', [{ op: 'finish', summary: 'fine' }])], wait: true });
    const deaf = await host.tool('delegate', { tasks: [hanging('deaf again')] });
    const ids = [clean.sc.subagent_ids[0], deaf.sc.subagent_ids[0]];
    await host.tool('steer_subagent', { subagent_id: ids[1], text: 'unheard' });
    await host.tool('interrupt_subagent', { subagent_id: ids[1] });
    const first = await host.notes.take((n) => n.method === 'notifications/message' && ids.includes(n.params.data?.subagent_id));
    expect(first.params).toMatchObject({ level: 'warning', data: { subagent_id: ids[1] } });
    await host.client.setLoggingLevel('debug');
  });
});
