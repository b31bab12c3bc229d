// What a tool call answers: `structuredContent` and, first in `content`, the same JSON as text (for
// hosts that read only text). subrun's refusals are `isError` results whose `structuredContent` is
// `{error: {code, message, data?}}`, the RPC's own code and message: this file is the one place
// where what a tool's calls throw becomes that form. A stack never leaves the process.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../log.ts';
import { RpcCode, RpcError } from '../server/errors.ts';
import type { ToolError } from './schemas.ts';

type Content = CallToolResult['content'][number];

export function success(structured: Record<string, unknown>, more: readonly Content[] = []): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(structured) }, ...more], structuredContent: structured };
}

export function refusal(error: ToolError): CallToolResult {
  const structured = { error };
  return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured, isError: true };
}

/** Anything a tool's RPC calls threw, as the refusal the host reads. */
export function refusalOf(err: unknown, logger: Logger): CallToolResult {
  if (err instanceof RpcError)
    return refusal(err.data === undefined ? { code: err.code, message: err.message } : { code: err.code, message: err.message, data: err.data });
  logger.error({ err }, 'mcp tool call failed');
  return refusal({ code: RpcCode.InternalError, message: 'Internal error' });
}

export const shuttingDown = (): CallToolResult => refusal({ code: RpcCode.ShuttingDown, message: 'server is shutting down' });

/** UTF-8 bytes of a call's arguments as JSON: the bound of one call, like a stdio line or a frame. */
export function argumentsBytes(args: unknown): number {
  return Buffer.byteLength(JSON.stringify(args), 'utf8');
}

export const tooLarge = (max_message_bytes: number): CallToolResult =>
  refusal({ code: RpcCode.InvalidRequest, message: 'arguments too large', data: { max_message_bytes } });
