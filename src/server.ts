// subrun/server: the JSON-RPC server for hosts, to embed in a process of your own: the server
// over one runtime, and the stdio and WebSocket transports it serves on.
export { RpcServer, METHODS, CATALOG, PROTOCOL_VERSION } from './rpc/server.ts';
export type { ServerOptions } from './rpc/server.ts';
export type { Connection } from './rpc/connection.ts';
export { stdioTransport } from './rpc/transports/stdio.ts';
export type { StdioOptions } from './rpc/transports/stdio.ts';
export { listenWs, isLoopback } from './rpc/transports/ws.ts';
export type { WsOptions, WsListener } from './rpc/transports/ws.ts';
export type { Transport } from './rpc/transports/transport.ts';
export { memoryPair } from './rpc/transports/memory.ts';
export type { MemoryClient } from './rpc/transports/memory.ts';
