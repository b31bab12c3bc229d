// subrun's library face: createRuntime(), the scripted runner, and the types a parent agent and
// a runner author need. Nothing here pulls in a transport.
export { createRuntime } from './delegation/runtime.ts';
export type { Runtime, RuntimeOptions, DelegateCallOptions } from './delegation/runtime.ts';
export { scripted, stepSchema, scriptedAgentSchema } from './delegation/runners/scripted.ts';
export type { Step, ScriptedAgent } from './delegation/runners/scripted.ts';
export { defineRunnerKind } from './delegation/runners/kinds.ts';
export type { RunnerKind, RunnerKinds } from './delegation/runners/kinds.ts';
export { buildCompletionEntry } from './delegation/completion.ts';
export { Transcript, TAIL_WINDOW_BYTES } from './child/transcript.ts';
export { EventBus } from './registry/events.ts';
export type { EventEnvelope, Subscriber } from './registry/events.ts';
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
