// Every example in docs/mcp.md, checked as what its fence names: ```sh claude (each `claude mcp
// add` line: the server it names is launched or dialled as written, and the SDK's client lists
// its tools), ```json mcpServers and ```json vscode (each server of the config launched or dialled
// the same way), ```json call TOOL (the SDK's params schema, then run on a live server, its answer
// checked by the SDK's client against the tool's outputSchema), ```json result TOOL (the SDK's
// result schema, and structuredContent against the live tool's outputSchema with the SDK's own
// validator), ```json notification (the SDK's server notification schema). `npx -y subrun` runs
// this package's own bin, which is what npx resolves it to once installed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolRequestParamsSchema, CallToolResultSchema, ServerNotificationSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, killAll, ROOT, startWsServer, type WsServer } from '../helpers/process.ts';
import { startStdioHost, type Host, type Json } from './harness.ts';

const DOC = readFileSync(join(ROOT, 'docs/mcp.md'), 'utf8');
const FENCES = [...DOC.matchAll(/```(\w+)(?: ([^\n]*))?\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1] ?? '', tag: (m[2] ?? '').trim(), body: m[3] ?? '' }));
const fences = (lang: string, kind: string) => FENCES.filter((f) => f.lang === lang && f.tag.split(' ')[0] === kind);
const TOKEN = 'docs-token';

let ws: WsServer;
let live: Host;
let tools: Tool[];

beforeAll(async () => {
  ws = await startWsServer(['--no-state'], { token: TOKEN });
  live = await startStdioHost();
  tools = (await live.client.listTools()).tools;
});
afterAll(async () => {
  await live.close();
  await killAll();
});

/** Splits a shell line into words: double quotes group, `$VAR` expands from `env`. */
function words(line: string, env: Record<string, string>): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => (m[1] ?? m[2] ?? '').replace(/\$(\w+)/g, (_, k: string) => env[k] ?? ''));
}

const expand = (s: string) => s.replace(/\$\{env:(\w+)\}/g, (_, k: string) => (k === 'SUBRUN_TOKEN' ? TOKEN : ''));

async function listsSix(transport: StdioClientTransport | StreamableHTTPClientTransport): Promise<void> {
  const client = new Client({ name: 'docs', version: '1' });
  await client.connect(transport);
  expect((await client.listTools()).tools).toHaveLength(6);
  await client.close();
}

/** A stdio server as a host would start it: `npx -y subrun ARGS` is this package's bin with ARGS. */
function launch(command: string, args: readonly string[], env: Record<string, string> = {}): StdioClientTransport {
  expect([command, ...args.slice(0, 2)]).toEqual(['npx', '-y', 'subrun']);
  const base = Object.fromEntries(
    Object.entries({ ...process.env, ...env }).filter((e): e is [string, string] => e[1] !== undefined && !e[0].startsWith('SUBRUN_')),
  );
  return new StdioClientTransport({ command: process.execPath, args: [BIN, ...args.slice(2)], env: base, cwd: ROOT, stderr: 'ignore' });
}

/** An HTTP server as a host would dial it: the documented port is the test server's. */
function dial(url: string, headers: Record<string, string>): StreamableHTTPClientTransport {
  const u = new URL(url);
  expect(u.port).toBe('8787');
  u.port = String(ws.port);
  return new StreamableHTTPClientTransport(u, { requestInit: { headers } });
}

async function runServerConfig(cfg: Json): Promise<void> {
  if (typeof cfg.command === 'string') return listsSix(launch(cfg.command, cfg.args as string[], cfg.env as Record<string, string> | undefined));
  const headers = Object.fromEntries(Object.entries(cfg.headers as Record<string, string>).map(([k, v]) => [k, expand(v)]));
  return listsSix(dial(cfg.url as string, headers));
}

describe('docs/mcp.md', () => {
  it('has every kind of example', () => {
    expect(fences('sh', 'claude')).toHaveLength(1);
    expect(fences('json', 'mcpServers').length).toBeGreaterThanOrEqual(2);
    expect(fences('json', 'vscode')).toHaveLength(1);
    expect(new Set(fences('json', 'call').map((f) => f.tag.split(' ')[1]))).toEqual(new Set(tools.map((t) => t.name)));
    expect(new Set(fences('json', 'result').map((f) => f.tag.split(' ')[1]))).toEqual(new Set(tools.map((t) => t.name)));
  });

  it('each `claude mcp add` line names a server that starts (stdio) or answers (HTTP) as written', async () => {
    const lines = (fences('sh', 'claude')[0]?.body ?? '').split('\n').filter((l) => l.trim() !== '');
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      const w = words(line, { SUBRUN_TOKEN: TOKEN });
      expect(w.slice(0, 3)).toEqual(['claude', 'mcp', 'add']);
      const dash = w.indexOf('--');
      if (dash >= 0) {
        expect(w.slice(3, dash)).toEqual(['subrun']);
        await listsSix(launch(w[dash + 1] ?? '', w.slice(dash + 2)));
      } else {
        expect(w.slice(3, 6)).toEqual(['--transport', 'http', 'subrun']);
        const header = w[w.indexOf('--header') + 1] ?? '';
        const colon = header.indexOf(':');
        await listsSix(dial(w[6] ?? '', { [header.slice(0, colon)]: header.slice(colon + 1).trim() }));
      }
    }
  });

  it('each mcpServers and VS Code config starts or reaches its servers as written', async () => {
    for (const f of fences('json', 'mcpServers')) {
      for (const cfg of Object.values((JSON.parse(f.body) as Json).mcpServers as Record<string, Json>)) await runServerConfig(cfg);
    }
    const vscode = JSON.parse(fences('json', 'vscode')[0]?.body ?? '{}') as Json;
    for (const cfg of Object.values(vscode.servers as Record<string, Json>)) {
      expect(['stdio', 'http']).toContain(cfg.type);
      await runServerConfig(cfg);
    }
  });

  it('each call fits the SDK and runs on a live server, its answer passing the client’s outputSchema check', async () => {
    for (const f of fences('json', 'call')) {
      const params = CallToolRequestParamsSchema.parse(JSON.parse(f.body));
      expect(params.name).toBe(f.tag.split(' ')[1]);
      const r = CallToolResultSchema.parse(await live.client.callTool(params));
      expect(r.structuredContent, f.body).toBeDefined();
    }
  });

  it('each result fits the SDK and its tool’s outputSchema; each notification the SDK’s schema', () => {
    const ajv = new AjvJsonSchemaValidator();
    for (const f of fences('json', 'result')) {
      const tool = tools.find((t) => t.name === f.tag.split(' ')[1]);
      const r = CallToolResultSchema.parse(JSON.parse(f.body));
      const check = ajv.getValidator(tool?.outputSchema ?? {});
      // The check itself: a result that lacks its fields, or mixes both forms, is refused.
      expect(check({}).valid).toBe(false);
      if (r.isError !== true) expect(check({ ...r.structuredContent, error: { code: 1, message: 'x' } }).valid).toBe(false);
      expect(check(r.structuredContent), f.body).toMatchObject({ valid: true });
      expect(r.isError === true, f.body).toBe('error' in (r.structuredContent ?? {}));
    }
    const notes = fences('json', 'notification');
    expect(notes.length).toBeGreaterThanOrEqual(2);
    for (const f of notes) {
      const { jsonrpc, ...n } = JSON.parse(f.body) as Json;
      expect(jsonrpc).toBe('2.0');
      expect(ServerNotificationSchema.safeParse(n).success, f.body).toBe(true);
    }
  });
});
