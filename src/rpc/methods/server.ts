// server.info : what this server is and what it speaks. ping / gateway.ping : liveness, answered
// at once whatever the children are doing (a handler that waits on nothing). client.capabilities :
// subrun sends no server-to-client requests.
import { defineMethod, type MethodDef } from '../context.ts';
import { paramsSchemas, PROTOCOL_VERSION } from '../../contract/wire.ts';

export const serverMethods: Record<string, MethodDef> = {
  'server.info': defineMethod(paramsSchemas['server.info'], (_p, { server }) => ({
    name: server.info.name,
    version: server.info.version,
    protocol_version: PROTOCOL_VERSION,
    methods: server.methodNames(),
    events: server.eventTypes(),
    limits: { ...server.limits },
  })),
  ping: defineMethod(paramsSchemas.ping, () => ({ pong: true })),
  // hermes' heartbeat (every 15 s once gateway.ready says `heartbeat: true`); its own server
  // answers `{ok: true}`, its contract `{pong: true}`: both.
  'gateway.ping': defineMethod(paramsSchemas['gateway.ping'], () => ({ pong: true, ok: true })),
  'client.capabilities': defineMethod(paramsSchemas['client.capabilities'], () => ({ server_requests: [] })),
};
