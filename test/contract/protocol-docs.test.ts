// Every JSON example in docs/protocol.md must parse and match the schema its fence names:
// ```json request METHOD, ```json response METHOD, ```json notification, ```json error.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RpcCode } from '../../src/server/errors.ts';
import { gatewayReadyPayloadSchema, paramsSchemas, resultSchemas, wireEventSchema, type MethodName } from '../../src/contract/wire.ts';

const rpcId = z.union([z.string(), z.number(), z.null()]);
const knownCodes = new Set<number>(Object.values(RpcCode));

function check(kind: string, arg: string | undefined, value: unknown): void {
  switch (kind) {
    case 'request': {
      const env = z
        .strictObject({ jsonrpc: z.literal('2.0'), id: rpcId, method: z.string(), params: z.record(z.string(), z.unknown()).optional() })
        .parse(value);
      expect(env.method).toBe(arg);
      paramsSchemas[env.method as MethodName].parse(env.params ?? {});
      return;
    }
    case 'response': {
      const env = z.strictObject({ jsonrpc: z.literal('2.0'), id: rpcId, result: z.unknown() }).parse(value);
      resultSchemas[arg as MethodName].parse(env.result);
      return;
    }
    case 'error': {
      const env = z
        .strictObject({
          jsonrpc: z.literal('2.0'),
          id: rpcId,
          error: z.strictObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
        })
        .parse(value);
      expect(knownCodes.has(env.error.code), `code ${env.error.code} is in the table`).toBe(true);
      return;
    }
    case 'notification': {
      const env = z.strictObject({ jsonrpc: z.literal('2.0'), method: z.literal('event'), params: wireEventSchema }).parse(value);
      if (env.params.type === 'gateway.ready') gatewayReadyPayloadSchema.parse(env.params.payload);
      return;
    }
    default:
      throw new Error(`unknown example kind ${JSON.stringify(kind)}`);
  }
}

const doc = readFileSync(new URL('../../docs/protocol.md', import.meta.url), 'utf8');
const blocks = [...doc.matchAll(/^```json([^\n]*)\n([\s\S]*?)^```/gm)].map((m) => {
  const [kind = '', arg] = (m[1] ?? '').trim().split(/\s+/);
  return { kind, arg, body: m[2] ?? '', line: doc.slice(0, m.index).split('\n').length };
});

describe('docs/protocol.md JSON examples', () => {
  it('shows a request and a response for every method', () => {
    for (const method of Object.keys(paramsSchemas)) {
      expect(
        blocks.some((b) => b.kind === 'request' && b.arg === method),
        `request ${method}`,
      ).toBe(true);
      expect(
        blocks.some((b) => b.kind === 'response' && b.arg === method),
        `response ${method}`,
      ).toBe(true);
    }
  });

  it.each(blocks.map((b) => [`line ${b.line}: ${b.kind} ${b.arg ?? ''}`, b] as const))('%s', (_name, b) => {
    const value: unknown = JSON.parse(b.body);
    expect(() => check(b.kind, b.arg, value)).not.toThrow();
  });

  it('catches a drifted example (the check can fail)', () => {
    const steer = { jsonrpc: '2.0', id: 1, result: { status: 'queued', subagent_id: 'sa_1', text: 't', steer_id: 'st_1', delivered: true } };
    expect(() => check('response', 'subagent.steer', steer)).toThrow();
    expect(() => check('error', undefined, { jsonrpc: '2.0', id: 1, error: { code: 4999, message: 'x' } })).toThrow();
  });
});
