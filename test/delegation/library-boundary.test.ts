// The library checks what the wire checks: a scripted step the wire would refuse (-32602 naming the
// field) is a TypeError naming the same field in-process; an option object holds to the names its
// type declares (a slip is refused by name, with the name it was near); tail's `since` follows
// subagent.tail's rule. Nothing here runs a child it should have refused.
import { describe, expect, it } from 'vitest';
import { createRuntime, scripted, stepSchema } from '../../src/index.ts';
import { RpcServer } from '../../src/server.ts';
import { connectMemory, fails, ok } from '../helpers/rpc-client.ts';

/** For every step kind, one step the wire refuses, and the field it names. */
const BAD_STEPS: Record<string, { step: Record<string, unknown>; field: string }> = {
  think: { step: { op: 'think' }, field: 'text' },
  say: { step: { op: 'say', text: 7 }, field: 'text' },
  tool: { step: { op: 'tool' }, field: 'name' },
  sleep: { step: { op: 'sleep', ms: 1.5 }, field: 'ms' },
  wait_steer: { step: { op: 'wait_steer', timeout_ms: -1 }, field: 'timeout_ms' },
  spawn: { step: { op: 'spawn', tasks: [{}] }, field: 'tasks.0.goal' },
  finish: { step: { op: 'finish', summary: 5 }, field: 'summary' },
  fail: { step: { op: 'fail' }, field: 'error' },
  hang: { step: { op: 'hang', stubborn: 'yes' }, field: 'stubborn' },
};

describe('the library at its boundary', () => {
  it('refuses a scripted step the wire refuses, naming the field', () => {
    // @ts-expect-error -- JavaScript callers can pass what the types forbid
    expect(() => scripted([{ op: 'teleport' }])).toThrow(/^scripted: steps\.0\.op: Invalid discriminator value\. Expected 'think' \| 'say' \| 'tool'/);
    // @ts-expect-error -- a tool step needs its name
    expect(() => scripted([{ op: 'say', text: 'ok' }, { op: 'tool' }])).toThrow(/^scripted: steps\.1\.name: /);
    expect(() => scripted([{ op: 'sleep', ms: -5 }])).toThrow(/^scripted: steps\.0\.ms: /);
    // What the wire takes, it takes.
    expect(
      scripted([
        { op: 'tool', name: 'read', ms: 1 },
        { op: 'finish', summary: 'done' },
      ]).model,
    ).toBe('scripted');
  });

  it('checks every step kind with the schema delegation.spawn uses: the same steps refused, the same field named', async () => {
    const kinds = stepSchema.options.map((o) => o.shape.op.value);
    expect(Object.keys(BAD_STEPS).sort()).toEqual([...kinds].sort());
    const { client } = connectMemory(new RpcServer());
    const { session_id } = await ok(client, 'session.create', {});
    for (const { step, field } of Object.values(BAD_STEPS)) {
      // @ts-expect-error -- each is a step the types forbid
      expect(() => scripted([step])).toThrow(`scripted: steps.0.${field}: `);
      const wire = await fails(client, 'delegation.spawn', { session_id, tasks: [{ goal: 'g', agent: { kind: 'scripted', steps: [step] } }] });
      expect(wire.code).toBe(-32602);
      expect(JSON.stringify(wire.data)).toContain(`steps.0.${field}`);
    }
  });

  it('refuses an option it does not know, by name, with the one it was near', () => {
    // @ts-expect-error -- not an option
    expect(() => createRuntime({ max_children: 3 })).toThrow(new TypeError('createRuntime: unknown option max_children'));
    // @ts-expect-error -- a slip of one letter
    expect(() => createRuntime({ max_spawn_dept: 2 })).toThrow(new TypeError('createRuntime: unknown option max_spawn_dept (did you mean max_spawn_depth?)'));
    const runtime = createRuntime();
    // @ts-expect-error -- timeout_ms, not timeout
    expect(() => runtime.delegate([{ goal: 'x', runner: scripted([]) }], { timeout: 5 })).toThrow(
      new TypeError('delegate: unknown option timeout (did you mean timeout_ms?)'),
    );
    // Refused before anything ran.
    expect(runtime.list()).toEqual([]);
  });

  it("holds tail's since to subagent.tail's rule", async () => {
    const runtime = createRuntime();
    const { subagent_ids, results } = runtime.delegate([{ goal: 'x', runner: scripted([{ op: 'say', text: 'hello' }]) }]);
    const id = subagent_ids[0] ?? '';
    expect(() => runtime.tail(id, -10)).toThrow(new RangeError('tail: since must be a non-negative integer, got -10'));
    expect(() => runtime.tail(id, 1.5)).toThrow(RangeError);
    await results;
    expect(runtime.tail(id, 0).available).toBe(true);
  });
});
