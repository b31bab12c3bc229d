// src/contract/catalog.json is the project's list of method and event names. It must equal what the
// server registers (its dispatch table) and what it actually emits on the wire, both ways, and
// server.info must report the same lists.
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import catalogJson from '../../src/contract/catalog.json' with { type: 'json' };
import { EVENT_TYPES } from '../../src/contract/wire.ts';
import { METHODS, RpcServer } from '../../src/server.ts';
import { defineTool } from '../../src/agent/tools/tool.ts';
import { callTools, FakeModel, finishChunk, reasoningChunk, textChunk, usageChunk } from '../helpers/fake-model.ts';
import { connectMemory, isEvent, ok, type RpcTestClient } from '../helpers/rpc-client.ts';

interface Catalog {
  readonly methods: readonly string[];
  readonly events: readonly string[];
}

interface Diff {
  /** In the code, not in the catalog. */
  readonly missing: string[];
  /** In the catalog, not in the code. */
  readonly extra: string[];
}

/** Compares the catalog with what the code registers and emits, in both directions. */
export function catalogDiff(catalog: Catalog, registered: Iterable<string>, emitted: Iterable<string>): { methods: Diff; events: Diff } {
  const diff = (listed: readonly string[], actual: Iterable<string>): Diff => {
    const have = new Set(listed);
    const real = new Set(actual);
    return {
      missing: [...real].filter((x) => !have.has(x)).sort(),
      extra: [...have].filter((x) => !real.has(x)).sort(),
    };
  };
  return { methods: diff(catalog.methods, registered), events: diff(catalog.events, emitted) };
}

const catalog: Catalog = catalogJson;
const registered = [...METHODS.keys()];

let server: RpcServer | undefined;
let model: FakeModel | undefined;
afterEach(async () => {
  await server?.shutdown();
  await model?.close();
  server = undefined;
  model = undefined;
});

const echo = defineTool({
  name: 'echo',
  description: 'Echoes its text.',
  schema: z.object({ text: z.string() }),
  handler: (args) => args.text,
});

/**
 * One session that produces every event type: a scripted child thinks, says, uses a tool, takes a
 * steer and delegates once more; the session's parent agent (on a local fake model) streams text,
 * thinks, calls a tool and takes a session steer.
 */
async function emittedTypes(): Promise<{ types: Set<string>; client: RpcTestClient }> {
  model = await FakeModel.start();
  server = new RpcServer({ max_spawn_depth: 2, openai: { endpoint: { base_url: model.url, model: 'fake', max_retries: 0 }, tools: [echo] } });
  const { client } = connectMemory(server);
  const { session_id } = await ok(client, 'session.create', {});

  const spawned = await ok(client, 'delegation.spawn', {
    session_id,
    tasks: [
      {
        goal: 'every event',
        agent: {
          kind: 'scripted',
          steps: [
            { op: 'think', text: 'planning' },
            { op: 'say', text: 'starting' },
            { op: 'tool', name: 'read', args: { path: 'a' } },
            { op: 'wait_steer' },
            { op: 'spawn', tasks: [{ goal: 'nested', agent: { kind: 'scripted', steps: [{ op: 'say', text: 'deep' }] } }] },
            { op: 'finish', summary: 'done' },
          ],
        },
      },
    ],
  });
  const child = spawned.subagent_ids[0] as string;
  await client.waitForEvent(isEvent('subagent.tool', child));
  await ok(client, 'subagent.steer', { session_id, subagent_id: child, text: 'carry on' });
  await client.waitForEvent((e) => e.type === 'delegation.complete' && e.payload.delegation_id === spawned.delegation_id);

  // The parent's first model reply (a tool call) is held until a session steer is queued, so the
  // steer is taken at the next model call and delivered once that reply has arrived.
  let steerQueued!: () => void;
  const gate = new Promise<void>((resolve) => (steerQueued = resolve));
  // Its last reply streams reasoning before its answer (message.thinking).
  model.reply(
    { ...callTools([{ name: 'echo', args: { text: 'hi' } }]), gates: { 0: gate } },
    { chunks: [reasoningChunk('weighing it'), textChunk('parent done'), finishChunk('stop'), usageChunk(10, 5)] },
  );
  const turn = await client.result<{ turn_id: string }>('prompt.submit', { session_id, text: 'do it' });
  const steer = await client.result<{ status: string }>('session.steer', { session_id, text: 'and be brief' });
  expect(steer.status).toBe('queued');
  steerQueued();
  await client.waitForEvent((e) => e.type === 'message.complete' && e.payload.turn_id === turn.turn_id);
  return { types: new Set(client.events.map((e) => e.type)), client };
}

describe('catalog.json', () => {
  it('is sorted and has no duplicates', () => {
    for (const list of [catalog.methods, catalog.events]) {
      expect([...list]).toEqual([...new Set(list)].sort());
    }
  });

  it('equals the registered methods and the emitted events, both ways', async () => {
    const { types } = await emittedTypes();
    // The scenario reaches every type the protocol names, or the comparison would prove little.
    expect([...types].sort()).toEqual(['gateway.ready', ...EVENT_TYPES].sort());
    expect(catalogDiff(catalog, registered, types)).toEqual({ methods: { missing: [], extra: [] }, events: { missing: [], extra: [] } });
  });

  it('server.info reports exactly the catalog', async () => {
    const { client } = await emittedTypes();
    const info = await ok(client, 'server.info');
    expect(info.methods).toEqual([...catalog.methods]);
    expect(info.events).toEqual([...catalog.events]);
  });
});

describe('catalogDiff', () => {
  // Built from the code, not from catalog.json, so these hold whatever the catalog says.
  const emitted = ['gateway.ready', ...EVENT_TYPES];
  const truth: Catalog = { methods: [...registered].sort(), events: [...emitted].sort() };
  const clean = { methods: { missing: [], extra: [] }, events: { missing: [], extra: [] } };

  it('finds nothing when the catalog matches', () => {
    expect(catalogDiff(truth, registered, emitted)).toEqual(clean);
  });

  it('reports a name the catalog lacks as missing, for every name in either list', () => {
    for (const name of truth.methods) {
      const d = catalogDiff({ ...truth, methods: truth.methods.filter((m) => m !== name) }, registered, emitted);
      expect(d).toEqual({ ...clean, methods: { missing: [name], extra: [] } });
    }
    for (const name of truth.events) {
      const d = catalogDiff({ ...truth, events: truth.events.filter((e) => e !== name) }, registered, emitted);
      expect(d).toEqual({ ...clean, events: { missing: [name], extra: [] } });
    }
    // The same seen from the code's side: it registers or emits a name the catalog does not list.
    expect(catalogDiff(truth, [...registered, 'x.y'], [...emitted, 'x.z'])).toEqual({
      methods: { missing: ['x.y'], extra: [] },
      events: { missing: ['x.z'], extra: [] },
    });
  });

  it('reports a name only the catalog has as extra', () => {
    expect(catalogDiff({ ...truth, methods: [...truth.methods, 'subagent.bogus'] }, registered, emitted)).toEqual({
      ...clean,
      methods: { missing: [], extra: ['subagent.bogus'] },
    });
    expect(catalogDiff({ ...truth, events: [...truth.events, 'subagent.bogus'] }, registered, emitted)).toEqual({
      ...clean,
      events: { missing: [], extra: ['subagent.bogus'] },
    });
    // A name the code dropped (no longer emitted) shows up as extra too.
    expect(
      catalogDiff(
        truth,
        registered,
        emitted.filter((e) => e !== 'subagent.thinking'),
      ),
    ).toEqual({
      ...clean,
      events: { missing: [], extra: ['subagent.thinking'] },
    });
  });
});
