// Resources: `subrun://session` (the ids and key, so the dashboard, WebSocket or REST can open the
// same session), and per child of this session its snapshot (JSON `{snapshot, entry?}`) and its
// transcript tail (text, the 16 KiB window). The SDK has no resources/subscribe: the handlers are
// ours, on the SDK's Server. A subscribed child's URI gets `notifications/resources/updated` after
// it changes (at most every 250 ms) and once after it completed, when a read shows the final state.
// Any URI that is not this session's child, foreign or unknown, is the same -32002.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ReadResourceResult,
  type Resource,
} from '@modelcontextprotocol/sdk/types.js';
import type { Snapshot } from '../contract/entities.ts';
import type { Logger } from '../log.ts';
import type { RpcEvent } from '../rpc/link.ts';
import type { McpSession } from './session.ts';
import { CHILD_TEMPLATE, childUri, parseUri, SESSION_URI, TAIL_TEMPLATE, tailUri } from './uris.ts';

/** The protocol's "resource not found". */
export const RESOURCE_NOT_FOUND = -32002;
export const UPDATE_EVERY_MS = 250;

const notFound = () => new McpError(RESOURCE_NOT_FOUND, 'Resource not found');

async function ownChild(s: McpSession, subagent_id: string): Promise<Snapshot | undefined> {
  const r = await s.link.call('subagent.list', { session_id: s.id, include_finished: true });
  return r.subagents.find((c) => c.subagent_id === subagent_id);
}

/** The child a URI names, when it is this session's; else -32002. */
async function childOf(s: McpSession, uri: string): Promise<{ kind: 'child' | 'tail'; snapshot: Snapshot }> {
  const p = parseUri(uri);
  if (!p || p.kind === 'session' || p.session_id !== s.id) throw notFound();
  const snapshot = await ownChild(s, p.subagent_id);
  if (!snapshot) throw notFound();
  return { kind: p.kind, snapshot };
}

async function read(s: McpSession, uri: string): Promise<ReadResourceResult> {
  if (uri === SESSION_URI) {
    const text = JSON.stringify({ session_id: s.id, session_key: s.key, generation: s.generation });
    return { contents: [{ uri, mimeType: 'application/json', text }] };
  }
  const { kind, snapshot } = await childOf(s, uri);
  const id = snapshot.subagent_id;
  if (kind === 'tail') {
    const t = await s.link.call('subagent.tail', { session_id: s.id, subagent_id: id });
    if (!t.available) throw notFound();
    return { contents: [{ uri, mimeType: 'text/plain', text: t.text }] };
  }
  let entry = s.entryOf(id);
  if (!entry && snapshot.status !== 'queued' && snapshot.status !== 'running') {
    const r = await s.link.call('delegation.result', { session_id: s.id, delegation_id: snapshot.delegation_id }).catch(() => undefined);
    entry = r?.results.find((e) => e.subagent_id === id);
  }
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(entry ? { snapshot, entry } : { snapshot }) }] };
}

function listed(s: McpSession, c: Snapshot): Resource[] {
  return [
    {
      uri: childUri(s.id, c.subagent_id),
      name: c.subagent_id,
      title: c.goal.slice(0, 120),
      mimeType: 'application/json',
      description: `snapshot (${c.status})`,
    },
    { uri: tailUri(s.id, c.subagent_id), name: `${c.subagent_id} tail`, mimeType: 'text/plain', description: 'the last 16 KiB of its transcript' },
  ];
}

export interface Resources {
  /** The session's events: updates of subscribed URIs, list_changed after a new child. */
  onEvent(e: RpcEvent): void;
  /** Subscriptions and timers go (the session ended). */
  close(): void;
}

export function installResources(mcp: McpServer, session: () => Promise<McpSession>, logger: Logger): Resources {
  const server = mcp.server;
  server.registerCapabilities({ resources: { subscribe: true, listChanged: true } });
  const subscribed = new Set<string>();
  const timers = new Map<string, NodeJS.Timeout>();
  const send = (uri: string) => {
    if (!subscribed.has(uri)) return;
    server.sendResourceUpdated({ uri }).catch((err: unknown) => logger.debug({ err }, 'resource update not sent'));
  };

  server.setRequestHandler(ListResourcesRequestSchema, async () => {
    const s = await session();
    const r = await s.link.call('subagent.list', { session_id: s.id, include_finished: true });
    const own: Resource = { uri: SESSION_URI, name: 'session', description: 'this MCP session’s subrun session: ids and key', mimeType: 'application/json' };
    return { resources: [own, ...r.subagents.flatMap((c) => listed(s, c))] };
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      { uriTemplate: CHILD_TEMPLATE, name: 'subagent', mimeType: 'application/json', description: 'a child: {snapshot, entry?}' },
      { uriTemplate: TAIL_TEMPLATE, name: 'subagent tail', mimeType: 'text/plain', description: "a child's transcript tail" },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => read(await session(), req.params.uri));
  server.setRequestHandler(SubscribeRequestSchema, async (req) => {
    const uri = req.params.uri;
    if (uri !== SESSION_URI) await childOf(await session(), uri);
    subscribed.add(uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, (req) => {
    subscribed.delete(req.params.uri);
    const t = timers.get(req.params.uri);
    if (t) clearTimeout(t);
    timers.delete(req.params.uri);
    return {};
  });

  return {
    onEvent(e) {
      if (e.type === 'subagent.spawn_requested') {
        server.sendResourceListChanged().catch((err: unknown) => logger.debug({ err }, 'list_changed not sent'));
        return;
      }
      if (!e.type.startsWith('subagent.') || e.session_id === null) return;
      const id = String(e.payload.subagent_id);
      for (const uri of [childUri(e.session_id, id), tailUri(e.session_id, id)]) {
        if (!subscribed.has(uri)) continue;
        if (e.type === 'subagent.complete') {
          // The final state is readable now (the session keeps the entry): one update, at once.
          clearTimeout(timers.get(uri));
          timers.delete(uri);
          send(uri);
        } else if (!timers.has(uri)) {
          timers.set(
            uri,
            setTimeout(() => {
              timers.delete(uri);
              send(uri);
            }, UPDATE_EVERY_MS),
          );
        }
      }
    },
    close() {
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
      subscribed.clear();
    },
  };
}
