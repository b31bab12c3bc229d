// server.info : what this server is and what it speaks. ping / gateway.ping : liveness, answered
// at once whatever the children are doing (a handler that waits on nothing). client.capabilities :
// subrun sends no server-to-client requests.
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
} as const;
