// server.info : what this server is and what it speaks.
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
};
