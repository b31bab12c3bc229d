// An in-memory transport pair: the server side plugs into RpcServer.connect(), the client side
// is what a test talks through. No sockets, same code path above the transport.
import type { Transport } from './transport.ts';

export interface MemoryClient {
  send(text: string): void;
  close(): void;
  onmessage?: (text: string) => void;
  onclose?: () => void;
}

export function memoryPair(): { server: Transport; client: MemoryClient } {
  let closed = false;
  let started = false;
  const early: string[] = [];
  const client: MemoryClient = {
    send(text) {
      if (closed) return;
      // Delivered asynchronously, like a real wire.
      queueMicrotask(() => {
        if (closed) return;
        if (!started) early.push(text);
        else server.onmessage?.(text);
      });
    },
    close() {
      shut();
    },
  };
  const server: Transport = {
    send(text) {
      if (closed) return;
      client.onmessage?.(text);
    },
    close() {
      shut();
    },
    start() {
      started = true;
      for (const t of early.splice(0)) server.onmessage?.(t);
    },
  };
  function shut() {
    if (closed) return;
    closed = true;
    server.onclose?.();
    client.onclose?.();
  }
  return { server, client };
}
