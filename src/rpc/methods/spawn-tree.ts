// spawn_tree.save / list / load: finished delegation trees a host keeps, persisted under the
// server's state directory (spawn-trees.ts). A tree is the host's own record: every holder of the
// server token may list and load them, in both authority modes; saving under a session id needs
// the right to that session (attached, or single-user mode), so no host files trees under
// another's session.
import { defineMethod, type MethodDef } from '../context.ts';
import type { ServerState } from '../context.ts';
import { paramsSchemas } from '../../contract/wire.ts';
import { RpcCode, RpcError } from '../errors.ts';
import { DEFAULT_LIST, type SpawnTreeStore } from '../spawn-trees.ts';

function store(server: ServerState): SpawnTreeStore {
  if (!server.spawnTrees) throw new RpcError(RpcCode.StateDisabled, 'spawn trees are not kept: the server was started with --no-state');
  return server.spawnTrees;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export const spawnTreeMethods: Record<string, MethodDef> = {
  'spawn_tree.save': defineMethod(paramsSchemas['spawn_tree.save'], (p, { server, transport }) => {
    if (!Array.isArray(p.subagents) || p.subagents.length === 0 || !p.subagents.every(isObject)) {
      throw new RpcError(RpcCode.IdRequired, 'subagents list required');
    }
    const trees = store(server);
    const session_id = p.session_id ?? '';
    if (session_id !== '' && !server.single_user) server.sessions.authorize(session_id, transport);
    return trees.save({
      session_id,
      started_at: p.started_at ?? null,
      finished_at: p.finished_at ?? server.clock.now() / 1000,
      label: p.label ?? '',
      subagents: p.subagents as Record<string, unknown>[],
    });
  }),

  'spawn_tree.list': defineMethod(paramsSchemas['spawn_tree.list'], async (p, { server }) => ({
    entries: await store(server).list({ session_id: p.session_id ?? undefined, cross_session: p.cross_session ?? false, limit: p.limit ?? DEFAULT_LIST }),
  })),

  'spawn_tree.load': defineMethod(paramsSchemas['spawn_tree.load'], (p, { server }) => {
    if (typeof p.path !== 'string' || p.path.trim() === '') throw new RpcError(RpcCode.IdRequired, 'path required');
    return store(server).load(p.path);
  }),
};
