// subrun's library face: createRuntime(), the scripted runner, and the types a parent agent and
// a runner author need. Nothing here pulls in a transport.
export { createRuntime } from './delegation/runtime.ts';
export type { Runtime, RuntimeOptions, DelegateCallOptions, RuntimeEvents, EventEnvelope, Subscriber } from './delegation/runtime.ts';
export { scripted, stepSchema, scriptedAgentSchema } from './delegation/runners/scripted.ts';
export type { Step, ScriptedAgent } from './delegation/runners/scripted.ts';
export { defineRunnerKind } from './delegation/runners/kinds.ts';
export type { RunnerKind, RunnerKinds } from './delegation/runners/kinds.ts';
export { buildCompletionEntry } from './delegation/completion.ts';
export { Transcript, TAIL_WINDOW_BYTES } from './child/transcript.ts';
export { EventBus } from './registry/events.ts';
export type { EventEnvelope as BusEnvelope, Subscriber as BusSubscriber } from './registry/events.ts';
export type { BusEvent, BusEventOf, BusPayloadOf, EventType } from './contract/events.ts';
export { MAX_STEER_BYTES } from './registry/registry.ts';
export type { SteerResult, InterruptResult, TailResult } from './registry/registry.ts';
export type { Snapshot } from './child/snapshot.ts';
export { SubrunError, ErrorCode, isSubrunError } from './errors.ts';
export { counterIds, randomIds } from './ids.ts';
export type { IdMaker } from './ids.ts';
export { systemClock } from './clock.ts';
export type { Clock } from './clock.ts';
export * from './types.ts';
export { openaiRunner, openaiKind, DEFAULT_MAX_ITERATIONS } from './agent/runner.ts';
export type { OpenAIRunnerConfig } from './agent/runner.ts';
export type { ChatEndpoint } from './agent/chat.ts';
export { STEER_OPEN, STEER_CLOSE } from './agent/steer-marker.ts';
export { defineTool } from './agent/tools/tool.ts';
export type { Tool, ToolContext } from './agent/tools/tool.ts';
export { workspaceTools } from './agent/tools/workspace.ts';
export type { ServerStore, StoreStats, Recovered } from './store/types.ts';
import type { SqliteStore, SqliteStoreOptions } from './store/sqlite.ts';
export type { SqliteStore, SqliteStoreOptions };
export type { SettledChild, Revived, ReviveOptions } from './delegation/recover.ts';

/**
 * Opens (or creates) a durable store in `dir` (`dir/store.db`, 0600 in a 0700 directory, one
 * process at a time): `createRuntime({ store: await openStore(dir) })` keeps every child and
 * steer across restarts, and `runtime.recovered()` lists what the last process lost. The native
 * SQLite module is loaded only here: a library that opens no store never loads it.
 */
export async function openStore(dir: string, options: SqliteStoreOptions = {}): Promise<SqliteStore> {
  const { SqliteStore } = await import('./store/sqlite.ts');
  return SqliteStore.open(dir, options);
}
