// server.info : what this server is and what it speaks. ping / gateway.ping : liveness, answered
// at once whatever the children are doing (a handler that waits on nothing). client.capabilities :
// subrun sends no server-to-client requests. gateway.capabilities : hermes' build probe.
import { PROTOCOL_VERSION } from '../../contract/entities.ts';
import { defineMethod } from './define.ts';

export const serverMethods = {
  'server.info': defineMethod('server.info', (_p, server) => ({
    name: server.info.name,
    version: server.info.version,
    protocol_version: PROTOCOL_VERSION,
    methods: server.catalog.methods(),
    events: server.catalog.events(),
    limits: { ...server.limits },
    recovered: { ...server.recovered },
    durable: server.store.durable,
  })),
  ping: defineMethod('ping', () => ({ pong: true })),
  // hermes' heartbeat (every 15 s once gateway.ready says `heartbeat: true`); its own server
  // answers `{ok: true}`, its contract `{pong: true}`: both.
  'gateway.ping': defineMethod('gateway.ping', () => ({ pong: true, ok: true })),
  'client.capabilities': defineMethod('client.capabilities', () => ({ server_requests: [] })),
  // hermes hosts probe the build at start: what it enforces (one parent turn per session: a
  // second prompt.submit is 4013), what it lacks (no subagent.snapshot), and the methods it has.
  'gateway.capabilities': defineMethod('gateway.capabilities', (_p, server) => ({
    per_session_exclusive_submit: true,
    worker_snapshot_v1: false,
    methods: server.catalog.methods(),
  })),
} as const;
