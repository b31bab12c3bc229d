// The one place where what the adapter's calls throw becomes an ACP (JSON-RPC) error. The SDK
// turns any other Error into -32603 and tries to parse its message as JSON for `data`, so
// everything leaves as a RequestError: subrun's codes (4000, 4001, 4002, 4003, 4005, ...) as they
// are, a stack never.
import * as acp from '@agentclientprotocol/sdk/unstable';
import type { Logger } from '../log.ts';
import { isRecord } from '../guards.ts';
import { RpcCode, RpcError } from '../server/errors.ts';

export function toRequestError(err: unknown, logger: Logger): acp.RequestError {
  if (err instanceof acp.RequestError) return err;
  // ACP already means -32002 "resource not found" (an unknown session): subrun's own -32002 (the
  // store cannot write) leaves as -32000, the server-error code, with what it is in `data`.
  if (err instanceof RpcError && err.code === RpcCode.StoreUnavailable) {
    return new acp.RequestError(RpcCode.ShuttingDown, err.message, { reason: 'store_unavailable', ...(isRecord(err.data) ? err.data : {}) });
  }
  if (err instanceof RpcError) return new acp.RequestError(err.code, err.message, err.data);
  logger.error({ err }, 'acp request failed');
  return acp.RequestError.internalError(undefined, 'internal error');
}
