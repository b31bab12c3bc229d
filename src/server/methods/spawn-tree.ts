// spawn_tree.save / list / load: finished delegation trees a host keeps, persisted under the
// server's state directory (spawn-trees.ts). Saving under a session id needs the right to that
// session (attached, or single-user mode), so no host files trees under another's session.
// Reading follows the same authority: by default a caller lists and loads the trees of the
// sessions it is attached to (or proves with `session_id` + `session_key`), and the trees saved
// without a session (a shared space every token holder sees); in single-user mode the token owns
// every session and so every tree (hermes' model).
import type { Services } from '../context.ts';
import { defineMethod } from './define.ts';
import { RpcCode, RpcError } from '../errors.ts';
import { DEFAULT_LIST, NO_SESSION, sessionDir, type SpawnTreeStore } from '../spawn-trees.ts';

function store(server: Services): SpawnTreeStore {
  if (!server.spawnTrees) throw new RpcError(RpcCode.StateDisabled, 'spawn trees are not kept: the server was started with --no-state');
  return server.spawnTrees;
}

/**
 * The tree directories the caller may read, or undefined for all (single-user mode): those of the
 * sessions it is attached to, the one it proves with its key, and the trees of no session. A
 * `session_id` it cannot prove is 4001, as for every session call.
 */
function visibleDirs(server: Services, transport: string, session_id: unknown, session_key: unknown): ((dir: string) => boolean) | undefined {
  if (server.single_user) return undefined;
  const dirs = new Set<string>([NO_SESSION]);
  for (const s of server.sessions.sessionsOf(transport)) dirs.add(sessionDir(s.session_id));
  if (typeof session_id === 'string' && session_id !== '') dirs.add(sessionDir(server.sessions.authorizeRead(session_id, session_key, transport).session_id));
  return (dir) => dirs.has(dir);
}

export const spawnTreeMethods = {
  'spawn_tree.save': defineMethod('spawn_tree.save', (p, server, transport) => {
    const trees = store(server);
    const session_id = p.session_id ?? '';
    if (session_id !== '' && !server.single_user) server.sessions.authorize(session_id, transport);
    return trees.save({
      session_id,
      started_at: p.started_at ?? null,
      finished_at: p.finished_at ?? server.clock.now() / 1000,
      label: p.label ?? '',
      subagents: p.subagents,
    });
  }),

  'spawn_tree.list': defineMethod('spawn_tree.list', async (p, server, transport) => {
    const trees = store(server);
    const visible = visibleDirs(server, transport, p.session_id, p.session_key);
    return {
      entries: await trees.list({ session_id: p.session_id ?? undefined, cross_session: p.cross_session ?? false, limit: p.limit ?? DEFAULT_LIST, visible }),
    };
  }),

  'spawn_tree.load': defineMethod('spawn_tree.load', (p, server, transport) => {
    const trees = store(server);
    return trees.load(p.path, visibleDirs(server, transport, p.session_id, p.session_key));
  }),
} as const;
