// The package as npm users get it: `npm pack`, installed into a fresh project, imported from
// plain JavaScript under plain node (no loader), type-checked by TypeScript consumers with the
// strictest settings users run (node16 and bundler resolution, exactOptionalPropertyTypes,
// noUncheckedIndexedAccess, skipLibCheck off) over the README's example, docs/embedding.md's
// and a host narrowing wire events, and its `subrun` command run from node_modules/.bin.
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lineInbox, ROOT } from '../helpers/process.ts';

const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; devDependencies: Record<string, string> };

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function run(cmd: string, args: readonly string[], cwd: string, input?: string): Promise<Ran> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { cwd, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** The README's library example, as written there. */
function readmeExample(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## As a library'));
  const code = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (!code) throw new Error('README has no ts block under "## As a library"');
  return code;
}

const SUBPATHS = `import { RpcServer, memoryPair } from 'subrun/server';
import { paramsSchemas, CATALOG, PROTOCOL_VERSION } from 'subrun/protocol';
import { ManualClock, counterIds, scripted } from 'subrun/testing';

const server = new RpcServer({ clock: new ManualClock(), ids: counterIds() });
const { server: transport, client } = memoryPair();
client.onmessage = (text: string) => {
  const message = JSON.parse(text) as { params?: { type?: string } };
  console.log(message.params?.type, PROTOCOL_VERSION, CATALOG.methods.includes('subagent.steer'));
  console.log(paramsSchemas['subagent.steer'].safeParse({ session_id: 's', subagent_id: 'a', text: 'go' }).success, typeof scripted);
};
server.connect(transport);
`;

/** The TypeScript blocks of a doc, in order. */
function tsBlocks(doc: string): string[] {
  return [...readFileSync(join(ROOT, doc), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
}

/** A host narrowing the wire's events by type (subrun/protocol's union). */
const WIRE_EVENTS = `import { parseWireEvent, type TypedWireEvent } from 'subrun/protocol';
const seen: TypedWireEvent[] = [];
export function onEvent(params: unknown): void {
  const e = parseWireEvent(params);
  seen.push(e);
  if (e.type === 'delegation.complete') console.log(e.session_id, e.payload.results.map((r) => r.status));
  if (e.type === 'subagent.complete') console.log(e.payload.subagent_id, e.payload.status, e.payload.missed_steer?.length);
  if (e.type === 'gateway.ready') console.log(e.payload.replay_epoch);
}
`;

/** A call the types must refuse: a subagent id is a string. */
const MISTYPED = `import { createRuntime } from 'subrun';
createRuntime().steer(42, 'focus');
createRuntime().events.subscribe('**', (e) => console.log(e.entry.status));
`;

function tsconfig(resolution: 'node16' | 'bundler', files: string[]): string {
  return JSON.stringify({
    compilerOptions: {
      module: resolution === 'node16' ? 'node16' : 'esnext',
      moduleResolution: resolution,
      target: 'ES2022',
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: false,
      noEmit: true,
      types: ['node'],
    },
    files,
  });
}

describe('the npm package, installed into a fresh project', () => {
  let dir: string;
  let files: string[];
  let tarball: string;
  const tsc = () => join(dir, 'node_modules', 'typescript', 'bin', 'tsc');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'subrun-consumer-'));
    // Vitest's global setup has just built dist/; the pack takes it as it is.
    const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], ROOT);
    expect(packed.code, packed.stderr).toBe(0);
    const [info] = JSON.parse(packed.stdout) as Array<{ filename: string; size: number; entryCount: number; files: Array<{ path: string }> }>;
    if (!info) throw new Error('npm pack printed nothing');
    files = info.files.map((f) => f.path);
    tarball = join(dir, info.filename);
    console.log(`[package] ${info.filename}: ${info.entryCount} files, ${(info.size / 1024).toFixed(0)} kB packed`);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    // TypeScript and Node's types as a consumer would pin them: the versions this project builds with.
    const installed = await run(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        // The one install script is better-sqlite3's native build (minutes from source here): the
        // consumer takes the build this checkout's `npm ci` made, for the same version and Node.
        '--ignore-scripts',
        tarball,
        `typescript@${PKG.devDependencies.typescript}`,
        `@types/node@${PKG.devDependencies['@types/node']}`,
      ],
      dir,
    );
    expect(installed.code, installed.stderr).toBe(0);
    cpSync(join(ROOT, 'node_modules', 'better-sqlite3', 'build'), join(dir, 'node_modules', 'better-sqlite3', 'build'), { recursive: true });
    writeFileSync(join(dir, 'example.mjs'), readmeExample());
    writeFileSync(join(dir, 'example.ts'), readmeExample());
    writeFileSync(join(dir, 'subpaths.ts'), SUBPATHS);
    writeFileSync(join(dir, 'subpaths.mjs'), SUBPATHS.replace(/\(text: string\)/, '(text)').replace(/ as \{ params\?: \{ type\?: string \} \}/, ''));
    writeFileSync(join(dir, 'mistyped.ts'), MISTYPED);
    writeFileSync(join(dir, 'wire-events.ts'), WIRE_EVENTS);
    const embedding = tsBlocks('docs/embedding.md');
    expect(embedding).toHaveLength(2);
    embedding.forEach((code, i) => writeFileSync(join(dir, `embedding-${i}.ts`), code));
    const typed = ['example.ts', 'subpaths.ts', 'wire-events.ts', 'embedding-0.ts', 'embedding-1.ts'];
    for (const resolution of ['node16', 'bundler'] as const) {
      writeFileSync(join(dir, `tsconfig.${resolution}.json`), tsconfig(resolution, typed));
      writeFileSync(join(dir, `tsconfig.${resolution}.mistyped.json`), tsconfig(resolution, ['mistyped.ts']));
    }
  }, 180_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('ships what runs and nothing else: compiled JavaScript, declarations, the bin, the dashboard, the docs, LICENSE, README, CHANGELOG', () => {
    expect(files).toContain('LICENSE');
    expect(files).toContain('CHANGELOG.md');
    // README and every --help point to docs/*.md: they are in the package.
    for (const f of ['docs/protocol.md', 'docs/http.md', 'docs/durability.md', 'docs/scale-out.md']) expect(files).toContain(f);
    expect(files).toContain('dist/index.js');
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('bin/subrun.js');
    // The dashboard is served from its sources as they are (no build step).
    for (const f of [
      'index.html',
      'app.js',
      'api.js',
      'state.js',
      'render.js',
      'dom.js',
      'forms.js',
      'timeline.js',
      'timeline-view.js',
      'style.css',
      'favicon.svg',
    ])
      expect(files).toContain(`src/http/ui/${f}`);
    const stray = files.filter(
      (f) =>
        !/^(dist\/.+\.(js|d\.ts|json)|bin\/subrun\.js|src\/http\/ui\/[\w-]+\.(html|js|css|svg)|docs\/[\w-]+\.md|LICENSE|README\.md|CHANGELOG\.md|package\.json)$/.test(
          f,
        ),
    );
    expect(stray).toEqual([]);
  });

  it("runs the README's library example under plain node, printing each child's entry", async () => {
    const ran = await run(process.execPath, ['example.mjs'], dir);
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    // The steer is taken after the tool (delivered, so no missed_steer); the interrupt ends the second.
    expect(ran.stdout.split('\n')).toEqual(['completed done undefined', 'interrupted  undefined', '']);
  });

  it('imports the server, protocol and testing subpaths under plain node', async () => {
    const ran = await run(process.execPath, ['subpaths.mjs'], dir);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('gateway.ready 1 true\ntrue function\n');
  });

  // A full tsc run over the package's declarations: 10-20 s alone on this machine's size, past 30 s
  // when the rest of the suite shares its two cores. The bound is for a hang, not a speed check.
  const TSC_TIMEOUT_MS = 180_000;

  it.each(['node16', 'bundler'] as const)(
    'type-checks the README example, docs/embedding.md, wire events and the subpaths with %s resolution, strict, exactOptionalPropertyTypes, noUncheckedIndexedAccess, skipLibCheck off',
    { timeout: TSC_TIMEOUT_MS },
    async (resolution) => {
      const ran = await run(process.execPath, [tsc(), '-p', `tsconfig.${resolution}.json`], dir);
      expect(ran.stdout + ran.stderr).toBe('');
      expect(ran.code).toBe(0);
    },
  );

  it.each(['node16', 'bundler'] as const)('refuses a mistyped call with %s resolution', { timeout: TSC_TIMEOUT_MS }, async (resolution) => {
    const ran = await run(process.execPath, [tsc(), '-p', `tsconfig.${resolution}.mistyped.json`], dir);
    expect(ran.code).not.toBe(0);
    expect(ran.stdout).toMatch(/mistyped\.ts\(2,23\): error TS2345: Argument of type 'number' is not assignable to parameter of type 'string'/);
    // An event's fields are typed only once its type is narrowed.
    expect(ran.stdout).toMatch(/mistyped\.ts\(3,\d+\): error TS18046: 'e\.entry' is of type 'unknown'/);
  });

  it('serves the dashboard from the installed package: the page, its modules and the stylesheet', async () => {
    const bin = join(dir, 'node_modules', '.bin', 'subrun');
    // Durable by default: its state directory under the consumer's own XDG_STATE_HOME (the native store loads).
    const env = { ...process.env, XDG_STATE_HOME: join(dir, 'state') };
    const child = spawn(bin, ['serve', '--ws', '--port', '0', '--token', 'package-test'], { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      const stderr = lineInbox(child.stderr, 'stderr of the installed serve');
      const listening = await stderr.take((l) => l.startsWith('subrun listening on '));
      const base = listening.slice('subrun listening on '.length).trim().replace(/^ws:/, 'http:').replace(/\/$/, '');
      for (const [path, type] of [
        ['/ui/', 'text/html'],
        ['/ui/app.js', 'text/javascript'],
        ['/ui/state.js', 'text/javascript'],
        ['/ui/style.css', 'text/css'],
      ] as const) {
        const res = await fetch(`${base}${path}`);
        expect(res.status, path).toBe(200);
        expect(res.headers.get('content-type'), path).toContain(type);
        expect((await res.text()).length, path).toBeGreaterThan(100);
      }
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('installs a `subrun` command that runs without a TypeScript loader', async () => {
    const bin = join(dir, 'node_modules', '.bin', 'subrun');
    const version = await run(bin, ['--version'], dir);
    expect(version).toEqual({ code: 0, stdout: `${PKG.version}\n`, stderr: '' });
    const served = await run(bin, ['serve', '--stdio'], dir, '{"jsonrpc":"2.0","id":1,"method":"server.info"}\n');
    expect(served.code).toBe(0);
    const reply = served.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id?: number; result?: { version?: string } })
      .find((m) => m.id === 1);
    expect(reply?.result?.version).toBe(PKG.version);
  });
});
