// The store of a server or runtime that keeps no state: every write is dropped, every read finds
// nothing, and what waits for a commit runs at once (nothing is ever pending), so events go out in
// the same synchronous step that made them, as they always did.
import type { ServerStore } from './types.ts';

const nothing = (): void => undefined;

export function memoryStore(): ServerStore {
  return {
    durable: false,
    available: true,
    replay_epoch: undefined,
    afterCommit: (deliver) => deliver(),
    flush: nothing,
    settled: () => undefined,
    spawned: nothing,
    started: nothing,
    progress: nothing,
    finished: nothing,
    steerAccepted: nothing,
    steerWithdrawn: nothing,
    steersTaken: nothing,
    steersDelivered: nothing,
    sessionSaved: nothing,
    sessionClosed: nothing,
    turnRunning: nothing,
    eventAppended: nothing,
    eventsEvicted: nothing,
    answerKept: nothing,
    answerDropped: nothing,
    delegationDispatched: nothing,
    delegationDone: nothing,
    delegationsDropped: nothing,
    loadSessions: () => [],
    loadEvents: () => [],
    loadAnswers: () => [],
    loadDelegation: () => undefined,
    openDelegations: () => [],
    unfinished: () => [],
    delegationChildren: () => [],
    child: () => undefined,
    revived: nothing,
    stats: () => undefined,
    close: nothing,
  };
}
