// subrun/testing: what a user's own tests need to drive the runtime deterministically: the
// scripted runner, a clock that moves only when told, id makers that count, and an in-memory
// transport pair that plugs a test client into an RpcServer without sockets.
export { scripted, stepSchema, scriptedAgentSchema } from '../delegation/runners/scripted.ts';
export type { Step, ScriptedAgent } from '../delegation/runners/scripted.ts';
export { ManualClock, flush } from './manual-clock.ts';
export { counterIds, randomIds } from '../ids.ts';
export type { IdMaker } from '../ids.ts';
export { memoryPair } from '../rpc/transports/memory.ts';
export type { MemoryClient } from '../rpc/transports/memory.ts';
