// Tools a model-driven child may call: a name, a description, a zod schema for the arguments and
// a handler. Arguments are validated before the handler runs; every failure (bad JSON, bad
// arguments, unknown tool, a throw) goes back to the model as a tool result, never a crash.
import { z } from 'zod';
import type { ToolSpec } from '../chat.ts';

export interface ToolContext {
  /** Aborted when the child is interrupted or times out: a long tool must stop. */
  readonly signal: AbortSignal;
}

export interface Tool<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly description: string;
  readonly schema: S;
  handler(args: z.output<S>, ctx: ToolContext): Promise<string> | string;
}

/** Keeps a tool's handler typed by its schema. */
export function defineTool<S extends z.ZodType>(tool: Tool<S>): Tool {
  return tool;
}

export const MAX_TOOL_OUTPUT_CHARS = 16_000;

export function toToolSpec(tool: Tool): ToolSpec {
  const parameters = z.toJSONSchema(tool.schema, { target: 'draft-7', unrepresentable: 'any' });
  delete parameters.$schema;
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters } };
}

export interface ToolRun {
  readonly ok: boolean;
  /** What goes back to the model (bounded). */
  readonly output: string;
}

/** A call's arguments as the model sent them, parsed once (for the preview and for the tool). */
export interface ToolArguments {
  readonly raw: string;
  /** The parsed value; the raw text when it is not JSON. An empty text is `{}`. */
  readonly json: unknown;
  readonly valid: boolean;
}

export function parseToolArguments(raw: string): ToolArguments {
  if (raw.trim() === '') return { raw, json: {}, valid: true };
  try {
    const json: unknown = JSON.parse(raw);
    return { raw, json, valid: true };
  } catch {
    return { raw, json: raw, valid: false };
  }
}

/** Runs one requested call; never throws. */
export async function runTool(tools: ReadonlyMap<string, Tool>, name: string, args: ToolArguments, ctx: ToolContext): Promise<ToolRun> {
  const tool = tools.get(name);
  if (!tool) {
    return { ok: false, output: `error: unknown tool ${JSON.stringify(name)}; available: ${[...tools.keys()].join(', ') || 'none'}` };
  }
  if (!args.valid) return { ok: false, output: `error: the arguments of ${name} are not valid JSON: ${args.raw.slice(0, 200)}` };
  const json = args.json;
  const parsed = tool.schema.safeParse(json);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(arguments)'}: ${i.message}`).join('; ');
    return { ok: false, output: `error: invalid arguments for ${name}: ${issues}` };
  }
  // An interrupt ends the call at once, even if the handler ignores its signal.
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<ToolRun>((resolve) => {
    onAbort = () => resolve({ ok: false, output: `error: ${name} was interrupted` });
    if (ctx.signal.aborted) onAbort();
    else ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
  const ran = (async (): Promise<ToolRun> => {
    try {
      const out = await tool.handler(parsed.data, ctx);
      // A tool handler is the embedder's code and may break its string type at run time.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion
      return { ok: true, output: bound(String(out)) };
    } catch (err) {
      return { ok: false, output: `error: ${name} failed: ${err instanceof Error ? err.message : String(err)}` };
    }
  })();
  try {
    return await Promise.race([ran, stopped]);
  } finally {
    if (onAbort) ctx.signal.removeEventListener('abort', onAbort);
  }
}

function bound(s: string): string {
  return s.length <= MAX_TOOL_OUTPUT_CHARS
    ? s
    : `${s.slice(0, MAX_TOOL_OUTPUT_CHARS)}\n[output truncated: ${s.length - MAX_TOOL_OUTPUT_CHARS} more characters]`;
}
