// Every JSON example in docs/acp.md must parse and match what its fence names: ```json settings
// IDE (a launch config that starts `serve --acp`), ```json request METHOD / ```json response
// METHOD (the SDK's own schema for ACP methods; the JSON-RPC method's schema behind each
// extension), ```json notification (a session/update in a shape the adapter builds, which the
// SDK's client parser keeps whole, or a session/cancel), ```json error (a code from the tables).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { extensionCall, EXTENSION_METHODS } from '../../src/acp/extensions.ts';
import * as u from '../../src/acp/updates.ts';
import { completionEntrySchema, paramsSchemas, resultSchemas, type MethodName } from '../../src/contract/wire.ts';
import type { CompletionEntry } from '../../src/types.ts';
import { RpcCode } from '../../src/server/errors.ts';
import {
  zCancelNotification,
  zInitializeRequest,
  zInitializeResponse,
  zNewSessionRequest,
  zNewSessionResponse,
  zPromptRequest,
  zPromptResponse,
  zSessionNotification,
} from './harness.ts';

type Ext = (typeof EXTENSION_METHODS)[number];
const rpcId = z.union([z.string(), z.number(), z.null()]);
const ACP_REQUESTS: Record<string, { params: z.ZodType; result: z.ZodType }> = {
  initialize: { params: zInitializeRequest, result: zInitializeResponse },
  'session/new': { params: zNewSessionRequest, result: zNewSessionResponse },
  'session/prompt': { params: zPromptRequest, result: zPromptResponse },
};
const EXT_RESULTS: Record<Ext, MethodName> = {
  '_subrun/steer': 'subagent.steer',
  '_subrun/list': 'subagent.list',
  '_subrun/tail': 'subagent.tail',
  '_subrun/revive': 'subagent.revive',
};
const knownCodes = new Set<number>([...Object.values(RpcCode), -32002]);

/** A value's shape: its keys and the kinds of their values, recursively (values themselves ignored). */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.length === 0 ? [] : [shape(v[0])];
  if (v === null) return 'null';
  if (typeof v === 'object')
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => [k, k === '_meta' || k === 'rawOutput' || k === 'rawInput' ? 'object' : shape(x)]),
    );
  return typeof v;
}

const entry = (over: Partial<CompletionEntry>): CompletionEntry => ({
  task_index: 0,
  subagent_id: 'sa_1',
  status: 'completed',
  exit_reason: 'completed',
  summary: 's',
  api_calls: 1,
  duration_seconds: 1,
  model: 'm',
  tokens: { input: 1, output: 1 },
  tool_trace: [{ tool: 't', status: 'ok' }],
  ...over,
});
const child = { subagent_id: 'sa_1', parent_id: null, goal: 'g', depth: 0 };
/** Every form of update the adapter builds (updates.ts), by shape. */
const BUILT = [
  u.messageChunk('t'),
  u.thoughtChunk('t'),
  u.userChunk('t'),
  u.toolStart('id', 'read_file', 'p'),
  u.toolDone('id', true, 'p'),
  u.announce(child),
  u.running('sa_1'),
  u.terminal(entry({})),
  u.terminal(entry({ status: 'interrupted' })),
  u.terminal(entry({ status: 'failed', error: 'e' })),
  u.childTool('sa_1', 1, 'read_file', 'p'),
  ...u.childToolsClosed(entry({})),
  u.childCall(child),
  u.childCallProgress('sa_1', 't'),
  u.childCallProgress('sa_1', 't', 'in_progress'),
  u.childCallDone(entry({})),
].map((x) => JSON.stringify(shape(x)));

function check(kind: string, arg: string | undefined, value: unknown): void {
  switch (kind) {
    case 'settings': {
      const text = JSON.stringify(value);
      expect(arg === 'zed' || arg === 'vscode').toBe(true);
      const agent = Object.values((value as Record<string, Record<string, unknown>>)[arg === 'zed' ? 'agent_servers' : 'acp.agents'] ?? {})[0] as {
        command: string;
        args: string[];
      };
      expect(agent.args.slice(0, 3)).toEqual(['subrun', 'serve', '--acp']);
      expect(text).toContain('--model');
      return;
    }
    case 'request': {
      const env = z.strictObject({ jsonrpc: z.literal('2.0'), id: rpcId, method: z.string(), params: z.record(z.string(), z.unknown()) }).parse(value);
      expect(env.method).toBe(arg);
      if (ACP_REQUESTS[env.method]) return void ACP_REQUESTS[env.method]?.params.parse(env.params);
      expect(EXTENSION_METHODS).toContain(env.method);
      const call = extensionCall(env.method as Ext, env.params);
      paramsSchemas[call.method].parse(call.params);
      expect(
        Object.values(call.params).every((x) => x !== undefined),
        'every documented param reaches the server',
      ).toBe(true);
      return;
    }
    case 'response': {
      const env = z.strictObject({ jsonrpc: z.literal('2.0'), id: rpcId, result: z.unknown() }).parse(value);
      const acp = ACP_REQUESTS[arg ?? ''];
      // The SDK fills in defaults; nothing documented may be stripped.
      if (acp) expect(acp.result.parse(env.result)).toMatchObject(env.result as object);
      else resultSchemas[EXT_RESULTS[arg as Ext]].parse(env.result);
      return;
    }
    case 'notification': {
      const env = z
        .strictObject({ jsonrpc: z.literal('2.0'), method: z.enum(['session/update', 'session/cancel']), params: z.record(z.string(), z.unknown()) })
        .parse(value);
      if (env.method === 'session/cancel') return void zCancelNotification.parse(env.params);
      // What the SDK's client would hand its handler: the whole example, nothing stripped.
      expect(zSessionNotification.parse(env.params)).toEqual(env.params);
      const up = env.params.update as Record<string, unknown>;
      expect(BUILT, `the adapter builds an update shaped like ${JSON.stringify(shape(up))}`).toContain(JSON.stringify(shape(up)));
      const meta = (up._meta as { subrun?: unknown } | undefined)?.subrun;
      if (meta !== undefined) completionEntrySchema.parse(meta);
      if (up.rawOutput !== undefined && up.toolCallId === (up.rawOutput as { subagent_id?: unknown }).subagent_id) completionEntrySchema.parse(up.rawOutput);
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
      expect(knownCodes.has(env.error.code), `code ${env.error.code} is in the tables`).toBe(true);
      return;
    }
    default:
      throw new Error(`unknown example kind ${JSON.stringify(kind)}`);
  }
}

const doc = readFileSync(new URL('../../docs/acp.md', import.meta.url), 'utf8');
const blocks = [...doc.matchAll(/^```json([^\n]*)\n([\s\S]*?)^```/gm)].map((m) => {
  const [kind = '', arg] = (m[1] ?? '').trim().split(/\s+/);
  return { kind, arg, body: m[2] ?? '', line: doc.slice(0, m.index).split('\n').length };
});

describe('docs/acp.md JSON examples', () => {
  it('shows both IDE settings, a request and a response for every extension, and the child forms', () => {
    expect(blocks.filter((b) => b.kind === 'settings').map((b) => b.arg)).toEqual(['zed', 'vscode']);
    for (const m of [...EXTENSION_METHODS, 'initialize', 'session/new', 'session/prompt']) {
      expect(
        blocks.some((b) => b.kind === 'request' && b.arg === m),
        `request ${m}`,
      ).toBe(true);
      expect(
        blocks.some((b) => b.kind === 'response' && b.arg === m),
        `response ${m}`,
      ).toBe(true);
    }
    const kinds = new Set(
      blocks
        .filter((b) => b.kind === 'notification')
        .map((b) => (JSON.parse(b.body) as { params: { update?: { sessionUpdate: string } } }).params.update?.sessionUpdate),
    );
    for (const k of ['subagent_update', 'tool_call', 'tool_call_update', 'agent_message_chunk', 'agent_thought_chunk', 'user_message_chunk'])
      expect(kinds.has(k), k).toBe(true);
  });

  it.each(blocks.map((b) => [`line ${b.line}: ${b.kind} ${b.arg ?? ''}`, b] as const))('%s', (_name, b) => {
    const value: unknown = JSON.parse(b.body);
    expect(() => check(b.kind, b.arg, value)).not.toThrow();
  });

  it('catches drifted examples (the checks can fail)', () => {
    const note = (update: unknown) => ({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: 's', update } });
    // The forms the SDK's client silently drops or reshapes.
    expect(() => check('notification', undefined, note({ sessionUpdate: 'subagent_update', sessionId: 'sa_1', state: 'running' }))).toThrow();
    expect(() =>
      check('notification', undefined, note({ sessionUpdate: 'subagent_update', sessionId: 'sa_1', title: 'g', capabilities: { cancel: true } })),
    ).toThrow();
    expect(() =>
      check(
        'notification',
        undefined,
        note({ sessionUpdate: 'subagent_update', sessionId: 'sa_1', state: { state: 'idle', stopReason: 'error', error: { message: 'x' } } }),
      ),
    ).toThrow();
    // A valid ACP update the adapter never builds.
    expect(() =>
      check('notification', undefined, note({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 't' }, messageId: 'm' })),
    ).toThrow();
    expect(() =>
      check('response', '_subrun/steer', {
        jsonrpc: '2.0',
        id: 1,
        result: { status: 'queued', subagent_id: 'sa_1', text: 't', steer_id: 'st_1', delivered: true },
      }),
    ).toThrow();
    expect(() => check('error', undefined, { jsonrpc: '2.0', id: 1, error: { code: 4999, message: 'x' } })).toThrow();
  });
});
