// subrun's ACP extension methods: what stable ACP lacks (steering a child; the RFD forbids
// prompting one) and what an IDE wants for a status view (the roster, a child's transcript tail).
// Each is the JSON-RPC method of the same meaning under ACP's `_` prefix and camelCase params;
// the server checks them in its own order and answers with its own shapes and codes.
import * as acp from '@agentclientprotocol/sdk/unstable';
import type { MethodName } from '../contract/methods.ts';
import type { RpcLink } from '../rpc/link.ts';

export const EXTENSION_METHODS = ['_subrun/steer', '_subrun/list', '_subrun/tail', '_subrun/revive'] as const;

type Params = Record<string, unknown>;

/** The SDK's params parser for an extension: an object, else -32602; the fields are the server's to check. */
export function objectParams(params: unknown): Params {
  if (!isParams(params)) throw acp.RequestError.invalidParams(undefined, 'params must be an object');
  return params;
}

function isParams(v: unknown): v is Params {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The JSON-RPC call behind each extension method. */
export function extensionCall(method: (typeof EXTENSION_METHODS)[number], p: Params): { method: MethodName; params: Params } {
  switch (method) {
    case '_subrun/steer':
      return { method: 'subagent.steer', params: { session_id: p.sessionId, subagent_id: p.subagentId, text: p.text } };
    case '_subrun/list':
      return {
        method: 'subagent.list',
        params: { session_id: p.sessionId, ...(p.includeFinished !== undefined ? { include_finished: p.includeFinished } : {}) },
      };
    case '_subrun/tail':
      return { method: 'subagent.tail', params: { session_id: p.sessionId, subagent_id: p.subagentId, ...(p.since !== undefined ? { since: p.since } : {}) } };
    case '_subrun/revive':
      return {
        method: 'subagent.revive',
        params: {
          session_id: p.sessionId,
          subagent_id: p.subagentId,
          ...(p.text !== undefined ? { text: p.text } : {}),
          ...(p.requeueMissed !== undefined ? { requeue_missed: p.requeueMissed } : {}),
        },
      };
  }
}

/** Relayed untyped: the IDE's values are the server's to check, in its order with its codes. */
export function runExtension(link: RpcLink, method: (typeof EXTENSION_METHODS)[number], p: Params): Promise<unknown> {
  const call = extensionCall(method, p);
  return link.relay(call.method, call.params);
}
