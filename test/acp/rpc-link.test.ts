// The adapter's link on a scripted server: a typed call's answer is checked against its method's
// result schema, while the relay (the IDE's extension calls) hands the answer on as it came.
import { describe, expect, it } from 'vitest';
import { RpcLink } from '../../src/rpc/link.ts';
import type { Transport } from '../../src/rpc/transports/transport.ts';

/** A server that answers every request with `result`, and counts what it was sent. */
function scripted(result: unknown) {
  const seen: unknown[] = [];
  const server = {
    connect(t: Transport) {
      t.onmessage = (text) => {
        const req: unknown = JSON.parse(text);
        seen.push(req);
        const id = typeof req === 'object' && req !== null && 'id' in req ? req.id : null;
        t.send(JSON.stringify({ jsonrpc: '2.0', id, result }));
      };
      t.start();
    },
  };
  return { server, seen };
}

describe('RpcLink', () => {
  it("resolves a call with the server's answer when it matches the method's result schema", async () => {
    const { server, seen } = scripted({ pong: true });
    const link = new RpcLink(server, () => undefined);
    await expect(link.call('ping', {})).resolves.toEqual({ pong: true });
    expect(seen).toEqual([{ jsonrpc: '2.0', id: 1, method: 'ping', params: {} }]);
  });

  it('rejects a call whose answer is off its result schema with -32603', async () => {
    const { server } = scripted({ pong: 'yes', extra: 1 });
    const link = new RpcLink(server, () => undefined);
    await expect(link.call('ping', {})).rejects.toMatchObject({ code: -32603, message: expect.stringContaining('ping') });
  });

  it('relays an answer as it came, unchecked', async () => {
    const { server } = scripted({ pong: 'yes', extra: 1 });
    const link = new RpcLink(server, () => undefined);
    await expect(link.relay('ping', { anything: [1] })).resolves.toEqual({ pong: 'yes', extra: 1 });
  });
});
