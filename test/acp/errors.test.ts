// What the adapter's calls throw, as the IDE sees it: subrun's codes pass through, except the one
// ACP already means otherwise (-32002 is its "resource not found").
import { describe, expect, it } from 'vitest';
import { toRequestError } from '../../src/acp/errors.ts';
import { silentLogger } from '../../src/log.ts';
import { RpcCode, RpcError } from '../../src/server/errors.ts';

describe('toRequestError', () => {
  it('sends subrun\'s "store unavailable" as -32000 with its reason, never as ACP\'s -32002', () => {
    const e = toRequestError(new RpcError(RpcCode.StoreUnavailable, 'store unavailable', { maybe_applied: true }), silentLogger);
    expect(e.code).toBe(-32000);
    expect(e.message).toBe('store unavailable');
    expect(e.data).toEqual({ reason: 'store_unavailable', maybe_applied: true });
  });

  it("passes subrun's other codes as they are", () => {
    const e = toRequestError(new RpcError(RpcCode.AlreadyRevived, 'already revived', { revived_as: 'sa_x' }), silentLogger);
    expect({ code: e.code, data: e.data }).toEqual({ code: 4017, data: { revived_as: 'sa_x' } });
  });
});
