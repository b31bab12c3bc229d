// Once the shutdown began, `delegate` is refused with -32000 (the error form, nothing spawned)
// while the other tools answer on: a host can still watch, steer and collect what is running.
// In process: the surface over the SDK's in-memory transport pair, driven by the SDK's Client.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createSurface, type McpSurface } from '../../src/mcp/surface.ts';
import { RpcServer } from '../../src/rpc/server.ts';
import { hanging } from './harness.ts';

const open: Array<{ surface: McpSurface; server: RpcServer; client: Client }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.client.close();
    await o.surface.close();
    await o.server.shutdown();
  }
});

async function connected(): Promise<{ surface: McpSurface; server: RpcServer; client: Client }> {
  const server = new RpcServer({ logger: pino({ level: 'silent' }) });
  const surface = createSurface({ server, max_message_bytes: 1024 * 1024, logger: pino({ level: 'silent' }) });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await surface.connect(serverSide);
  const client = new Client({ name: 'closing-test', version: '1' });
  await client.connect(clientSide);
  const o = { surface, server, client };
  open.push(o);
  return o;
}

type Structured = Record<string, unknown> | undefined;

describe('delegate once the shutdown began', () => {
  it('answers -32000 and spawns nothing, while list and steer answer on', async () => {
    const { surface, server, client } = await connected();
    const first = await client.callTool({ name: 'delegate', arguments: { tasks: [hanging('before')] } });
    expect(first.isError).not.toBe(true);
    const [child] = ((first.structuredContent as Structured)?.subagent_ids as string[] | undefined) ?? [];
    expect(child).toBeDefined();

    surface.shutdown();
    const refused = await client.callTool({ name: 'delegate', arguments: { tasks: [hanging('after')] } });
    expect(refused.isError).toBe(true);
    expect((refused.structuredContent as Structured)?.error).toMatchObject({ code: -32000 });
    expect(server.runtime.liveCount).toBe(1);

    const list = await client.callTool({ name: 'list_subagents', arguments: {} });
    expect(list.isError).not.toBe(true);
    expect(((list.structuredContent as Structured)?.subagents as Array<{ subagent_id: string }>).map((c) => c.subagent_id)).toEqual([child]);
    const steer = await client.callTool({ name: 'steer_subagent', arguments: { subagent_id: child, text: 'still listening' } });
    expect((steer.structuredContent as Structured)?.status).toBe('queued');
  });
});
