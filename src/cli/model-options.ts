// The model flags shared by `subrun serve` and `subrun demo`: where the OpenAI-compatible server
// is, which model, the key, the workspace the built-in tools may read, and the loop bound.
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { UsageError, type FlagSpec, type FlagValues } from './flags.ts';
import { DEFAULT_MAX_ITERATIONS, type OpenAIRunnerConfig } from '../agent/runner.ts';
import { workspaceTools } from '../agent/tools/workspace.ts';

export const MODEL_FLAGS = [
  {
    flag: 'base-url',
    env: ['SUBRUN_BASE_URL', 'OPENAI_BASE_URL'],
    kind: 'string',
    arg: 'URL',
    help: 'an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (default: none, the scripted runner)',
  },
  { flag: 'model', env: 'SUBRUN_MODEL', kind: 'string', arg: 'M', help: 'the model to ask (needed with --base-url)' },
  { flag: 'api-key', env: ['SUBRUN_API_KEY', 'OPENAI_API_KEY'], kind: 'string', arg: 'K', help: 'sent as Authorization: Bearer K' },
  {
    flag: 'workspace',
    env: 'SUBRUN_WORKSPACE',
    kind: 'string',
    arg: 'DIR',
    help: "the root the model's read_file, list_dir and search_text may read (default .)",
  },
  { flag: 'max-iterations', env: 'SUBRUN_MAX_ITERATIONS', kind: 'int', min: 1, max: 1000, help: 'model calls per child or parent turn (default 50)' },
  { flag: 'request-timeout-ms', env: 'SUBRUN_REQUEST_TIMEOUT_MS', kind: 'int', min: 100, help: 'one model request, to the end of its stream (default 120000)' },
] as const satisfies readonly FlagSpec[];

/**
 * The openai runner's configuration, or undefined when no --base-url was given. `sources` says
 * where each value came from: OPENAI_BASE_URL alone (set on many machines for other tools) does
 * not turn the model on; it only serves as the fallback once a model is named.
 */
export function modelConfig(v: FlagValues<typeof MODEL_FLAGS>, sources: Record<string, string> = {}): OpenAIRunnerConfig | undefined {
  const workspace = resolve(v.workspace ?? '.');
  if (!isDirectory(workspace)) throw new UsageError(`--workspace must be an existing directory, got ${JSON.stringify(v.workspace)}`);
  const base_url = v['base-url'];
  if (base_url === undefined) {
    if (v.model !== undefined) throw new UsageError('--model needs --base-url (or SUBRUN_BASE_URL / OPENAI_BASE_URL)');
    return undefined;
  }
  if (v.model === undefined && sources['base-url'] === 'OPENAI_BASE_URL') return undefined;
  let url: URL;
  try {
    url = new URL(base_url);
  } catch {
    throw new UsageError(`--base-url must be an http(s) URL, got ${JSON.stringify(base_url)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--base-url must be an http(s) URL, got ${JSON.stringify(base_url)}`);
  const model = v.model;
  if (model === undefined) {
    if (sources['base-url'] === 'OPENAI_BASE_URL') return undefined;
    throw new UsageError('--base-url needs --model (or SUBRUN_MODEL)');
  }
  return {
    endpoint: {
      base_url,
      model,
      api_key: v['api-key'],
      request_timeout_ms: v['request-timeout-ms'],
    },
    tools: workspaceTools(workspace),
    max_iterations: v['max-iterations'] ?? DEFAULT_MAX_ITERATIONS,
  };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
