// The model flags shared by `serve` and `demo`: --base-url / --model / --api-key and their
// environment twins (SUBRUN_* first, then the OPENAI_* fallbacks), the checks that refuse a bad
// configuration with a one-line reason, and the same at the process level (exit 2), plus one real
// `serve --stdio` on a fake model to show the flags reach the parent agent.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { parseFlags, UsageError } from '../../src/cli/flags.ts';
import { DEFAULT_MAX_ITERATIONS } from '../../src/agent/runner.ts';
import { MODEL_FLAGS, modelConfig } from '../../src/cli/model-options.ts';
import { answer, FakeModel } from '../helpers/fake-model.ts';
import { call, killAll, nextEvent, runSubrun, startStdio } from '../helpers/process.ts';

/** The config from argv and an explicit environment (never the test process's own). */
const config = (argv: string[], env: Record<string, string> = {}) => {
  const { values, sources } = parseFlags(argv, MODEL_FLAGS, env);
  return modelConfig(values, sources);
};

/** The UsageError message `fn` throws. */
function usage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error('expected a UsageError');
}

// No OPENAI_* variable of the machine running the tests may leak into a spawned subrun.
const NO_OPENAI_ENV = { OPENAI_BASE_URL: '', OPENAI_API_KEY: '' };

describe('modelConfig: flags and environment twins', () => {
  it('no --base-url anywhere: no model', () => {
    expect(config([])).toBeUndefined();
    expect(config([], { OPENAI_API_KEY: 'sk-unused' })).toBeUndefined();
  });

  it('flags give the endpoint, the built-in workspace tools and the default loop bound', () => {
    const c = config(['--base-url', 'http://127.0.0.1:8080/v1', '--model', 'qwen', '--api-key', 'k1']);
    expect(c?.endpoint).toEqual({ base_url: 'http://127.0.0.1:8080/v1', model: 'qwen', api_key: 'k1', request_timeout_ms: undefined });
    expect(c?.tools?.map((t) => t.name)).toEqual(['read_file', 'list_dir', 'search_text']);
    expect(c?.max_iterations).toBe(DEFAULT_MAX_ITERATIONS);
    expect(config(['--base-url=https://api.example.com/v1', '--model=gpt'])?.endpoint.api_key).toBeUndefined();
  });

  it('SUBRUN_BASE_URL / SUBRUN_MODEL / SUBRUN_API_KEY apply without flags', () => {
    const c = config([], { SUBRUN_BASE_URL: 'http://localhost:1234/v1', SUBRUN_MODEL: 'local', SUBRUN_API_KEY: 'sk-subrun' });
    expect(c?.endpoint).toMatchObject({ base_url: 'http://localhost:1234/v1', model: 'local', api_key: 'sk-subrun' });
  });

  it('OPENAI_BASE_URL and OPENAI_API_KEY are fallbacks', () => {
    const c = config([], { OPENAI_BASE_URL: 'https://api.openai.com/v1', OPENAI_API_KEY: 'sk-openai', SUBRUN_MODEL: 'gpt-x' });
    expect(c?.endpoint).toMatchObject({ base_url: 'https://api.openai.com/v1', model: 'gpt-x', api_key: 'sk-openai' });
  });

  it('the SUBRUN_ twin wins over the OPENAI_ fallback; an empty twin falls through to it', () => {
    const both = config([], {
      SUBRUN_BASE_URL: 'http://subrun.example/v1',
      OPENAI_BASE_URL: 'http://openai.example/v1',
      SUBRUN_API_KEY: 'sk-subrun',
      OPENAI_API_KEY: 'sk-openai',
      SUBRUN_MODEL: 'm',
    });
    expect(both?.endpoint).toMatchObject({ base_url: 'http://subrun.example/v1', api_key: 'sk-subrun' });
    const empty = config([], {
      SUBRUN_BASE_URL: '',
      OPENAI_BASE_URL: 'http://openai.example/v1',
      SUBRUN_API_KEY: '',
      OPENAI_API_KEY: 'sk-openai',
      SUBRUN_MODEL: 'm',
    });
    expect(empty?.endpoint).toMatchObject({ base_url: 'http://openai.example/v1', api_key: 'sk-openai' });
  });

  it('a flag wins over every twin', () => {
    const c = config(['--base-url', 'http://flag.example/v1', '--model', 'flag-model', '--api-key', 'sk-flag'], {
      SUBRUN_BASE_URL: 'http://env.example/v1',
      OPENAI_BASE_URL: 'http://openai.example/v1',
      SUBRUN_MODEL: 'env-model',
      SUBRUN_API_KEY: 'sk-env',
      OPENAI_API_KEY: 'sk-openai',
    });
    expect(c?.endpoint).toMatchObject({ base_url: 'http://flag.example/v1', model: 'flag-model', api_key: 'sk-flag' });
  });

  it('--max-iterations and --request-timeout-ms (and their twins) are checked and applied', () => {
    const c = config(['--base-url', 'http://h/v1', '--model', 'm', '--max-iterations', '7'], { SUBRUN_REQUEST_TIMEOUT_MS: '5000' });
    expect(c?.max_iterations).toBe(7);
    expect(c?.endpoint.request_timeout_ms).toBe(5000);
    expect(config(['--base-url', 'http://h/v1', '--model', 'm'], { SUBRUN_MAX_ITERATIONS: '3' })?.max_iterations).toBe(3);
    expect(usage(() => config(['--base-url', 'http://h/v1', '--model', 'm', '--max-iterations', '0']))).toContain('--max-iterations');
    expect(usage(() => config(['--base-url', 'http://h/v1', '--model', 'm'], { SUBRUN_MAX_ITERATIONS: '1001' }))).toContain('SUBRUN_MAX_ITERATIONS');
    expect(usage(() => config(['--base-url', 'http://h/v1', '--model', 'm', '--request-timeout-ms', '50']))).toContain('--request-timeout-ms');
  });

  it('a bad --base-url is refused with a one-line reason naming it', () => {
    for (const bad of ['not a url', 'ftp://files.example/v1', 'file:///etc/passwd', '127.0.0.1:8080/v1']) {
      const msg = usage(() => config(['--base-url', bad, '--model', 'm']));
      expect(msg).toBe(`--base-url must be an http(s) URL, got ${JSON.stringify(bad)}`);
    }
    expect(usage(() => config([], { SUBRUN_BASE_URL: 'nope', SUBRUN_MODEL: 'm' }))).toContain('--base-url must be an http(s) URL');
    expect(usage(() => config(['--base-url', '', '--model', 'm']))).toContain('--base-url');
  });

  it('--model without --base-url, and --base-url without --model, are refused', () => {
    expect(usage(() => config(['--model', 'm']))).toBe('--model needs --base-url (or SUBRUN_BASE_URL / OPENAI_BASE_URL)');
    expect(usage(() => config(['--base-url', 'http://h/v1']))).toBe('--base-url needs --model (or SUBRUN_MODEL)');
    expect(usage(() => config([], { SUBRUN_BASE_URL: 'http://h/v1' }))).toContain('needs --model');
  });

  it('OPENAI_BASE_URL alone (set for other tools) does not turn the model on, and is not checked', () => {
    expect(config([], { OPENAI_BASE_URL: 'http://h/v1' })).toBeUndefined();
    expect(config([], { OPENAI_BASE_URL: 'not a url' })).toBeUndefined();
    expect(config([], { OPENAI_BASE_URL: 'http://h/v1', SUBRUN_MODEL: 'm' })?.endpoint.base_url).toBe('http://h/v1');
  });

  it('--workspace must be an existing directory; the tools are rooted there', async () => {
    expect(usage(() => config(['--workspace', '/no/such/dir/anywhere']))).toContain('--workspace');
    const dir = await mkdtemp(join(tmpdir(), 'subrun-mo-'));
    try {
      const c = config(['--base-url', 'http://h/v1', '--model', 'm', '--workspace', dir]);
      const list = c?.tools?.find((t) => t.name === 'list_dir');
      expect(await list?.handler({ path: '.' }, { signal: new AbortController().signal })).toBe('(empty)');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('subrun serve: a bad model configuration is refused at start', () => {
  // The cases run concurrently: kill leftovers only once all of them are done.
  afterAll(async () => {
    await killAll();
  });

  it.concurrent.each<{ name: string; args: string[]; env: Record<string, string>; names: string[] }>([
    {
      name: '--default-runner openai without a model',
      args: ['serve', '--stdio', '--default-runner', 'openai'],
      env: {},
      names: ['--default-runner', '--base-url', '--model'],
    },
    { name: '--model without --base-url', args: ['serve', '--stdio', '--model', 'm'], env: {}, names: ['--model', '--base-url'] },
    { name: 'a --base-url that is not a URL', args: ['serve', '--stdio', '--base-url', 'not-a-url', '--model', 'm'], env: {}, names: ['--base-url'] },
    { name: '--base-url without --model', args: ['serve', '--stdio', '--base-url', 'http://127.0.0.1:9/v1'], env: {}, names: ['--model'] },
    { name: 'SUBRUN_BASE_URL without a model', args: ['serve', '--stdio'], env: { SUBRUN_BASE_URL: 'http://127.0.0.1:9/v1' }, names: ['--model'] },
    { name: 'an unknown --default-runner', args: ['serve', '--stdio', '--default-runner', 'gpt'], env: {}, names: ['--default-runner'] },
  ])('$name: exit 2 and one line naming the option', { timeout: 90_000 }, async ({ args, env, names }) => {
    const r = await runSubrun(args, { ...NO_OPENAI_ENV, ...env });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toBe('');
    const lines = r.stderr.split('\n').filter((l) => l !== '');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^subrun: /);
    for (const name of names) expect(lines[0]).toContain(name);
  });
});

describe('subrun serve: a model configuration at start', () => {
  let model: FakeModel | undefined;
  afterEach(async () => {
    await killAll();
    await model?.close();
    model = undefined;
  });

  it('a server started with --base-url/--model runs the parent agent on that model', { timeout: 60_000 }, async () => {
    model = await FakeModel.start();
    model.reply(answer('hello from the model'));
    const { peer } = await startStdio(['--base-url', model.url, '--model', 'served-model', '--default-runner', 'openai'], {
      ...NO_OPENAI_ENV,
      SUBRUN_API_KEY: 'sk-served',
    });
    const { session_id } = await call<{ session_id: string }>(peer, 'session.create', {});
    const started = await call<{ turn_id: string }>(peer, 'prompt.submit', { session_id, text: 'hi' });
    const done = await nextEvent(peer, (e) => e.type === 'message.complete', undefined, 'message.complete');
    expect(done.payload).toMatchObject({ turn_id: started.turn_id, status: 'complete', text: 'hello from the model' });
    expect(model.requests[0]?.body.model).toBe('served-model');
    expect(model.requests[0]?.headers.authorization).toBe('Bearer sk-served');
    expect(model.requests[0]?.body.tools?.map((t) => t.function.name)).toEqual(['read_file', 'list_dir', 'search_text', 'delegate_task']);
  });
});
