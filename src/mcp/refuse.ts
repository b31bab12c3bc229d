// The gate's and the session map's own HTTP refusals, shaped as the SDK's (a JSON-RPC error, no id).
import type { ServerResponse } from 'node:http';

/** A JSON-RPC error body with no id, as the SDK's own refusals are. */
export function refuse(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers });
  res.end(body);
}
