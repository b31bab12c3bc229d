// The MCP host's side for tests: the official SDK's Client in the test process, the server as a
// real `subrun serve --mcp` process over a real stdio pipe (StdioClientTransport), or a real
// `subrun serve --ws` over HTTP on 127.0.0.1 (StreamableHTTPClientTransport). Children run on the
// built-in scripted runner. Every notification the client receives is kept in arrival order in an
// Inbox, so a test waits on a notification, never on time.
import { rmSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { BIN, cleanEnv, Inbox, ROOT, scriptedTask } from '../helpers/process.ts';

export { scriptedTask };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read wire JSON loosely
export type Json = Record<string, any>;

export interface Note {
  readonly method: string;
  readonly params: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface Host {
  readonly client: Client;
  /** Log messages, resource updates and list changes, in arrival order. */
  readonly notes: Inbox<Note>;
  /** A tool call; its structuredContent (the error form included) and whether it is an error. */
  tool(name: string, args: Record<string, unknown>): Promise<{ isError: boolean; sc: Record<string, any> }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>;
}

function stringEnv(extra: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(cleanEnv(extra)).filter((e): e is [string, string] => e[1] !== undefined));
}

export function hostOf(client: Client, label: string): Host {
  const notes = new Inbox<Note>(label);
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => notes.push({ method: n.method, params: n.params }));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => notes.push({ method: n.method, params: n.params }));
  client.setNotificationHandler(ResourceListChangedNotificationSchema, (n) => notes.push({ method: n.method, params: n.params ?? {} }));
  return {
    client,
    notes,
    async tool(name, args) {
      const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
      return { isError: r.isError === true, sc: r.structuredContent ?? {} };
    },
    close: () => client.close(),
  };
}

/** `subrun serve --mcp ...extra` with the SDK's stdio client connected (initialize done). */
export async function startStdioHost(extra: readonly string[] = []): Promise<Host & { transport: StdioClientTransport; stderr: string[] }> {
  const env = stringEnv();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'serve', '--mcp', ...extra],
    env,
    cwd: ROOT,
    stderr: 'pipe',
  });
  const stderr: string[] = [];
  transport.stderr?.on('data', (d: Buffer) => stderr.push(d.toString('utf8')));
  const client = new Client({ name: 'test-host', version: '1.0.0' });
  const host = hostOf(client, 'mcp stdio notifications');
  await client.connect(transport);
  const close = async () => {
    await host.close();
    // The state home cleanEnv made for the process (a --mcp server writes nothing there unless told to).
    if (env.XDG_STATE_HOME) rmSync(env.XDG_STATE_HOME, { recursive: true, force: true });
  };
  return { ...host, close, transport, stderr };
}

/** The SDK's Streamable HTTP client on `url` with the token. */
export async function startHttpHost(
  url: string,
  token: string,
  label = 'mcp http notifications',
): Promise<Host & { transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'test-host', version: '1.0.0' });
  const host = hostOf(client, label);
  await client.connect(transport);
  return { ...host, transport };
}

/** The JSON text of a resource, parsed. */
export async function readJson(client: Client, uri: string): Promise<Json> {
  const c = (await client.readResource({ uri })).contents[0];
  if (!c || !('text' in c)) throw new Error(`no text at ${uri}`);
  return JSON.parse(c.text) as Json;
}

/** A child that waits for a steer (then finishes with it as its summary's source). */
export const steerable = (goal: string) => scriptedTask(goal, [{ op: 'wait_steer' }, { op: 'finish', summary: `${goal} steered` }]);
/** A child that runs until it is interrupted. */
export const hanging = (goal: string) => scriptedTask(goal, [{ op: 'hang' }]);
