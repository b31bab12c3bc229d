// Startup, from the package as npm users install it: `subrun --help` against bare `node -e 0`
// (goal: at most 2x), and `subrun serve --ws` until it listens against a bare node:http server
// until it listens (goal: at most 3x). The project is packed and installed into a scratch
// project first (dist/ must be built: `npm run bench` builds it); the two sides of each pair run
// interleaved, one after the other, and the figures are medians.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { median, row, type Row } from '../lib/stats.ts';

const BARE_HTTP = `require('node:http').createServer().listen(0, '127.0.0.1', () => process.stderr.write('listening\\n'))`;

/** Milliseconds from spawn until `ready` matches stderr (or until exit when `ready` is undefined). */
function timeStart(args: readonly string[], cwd: string, ready?: RegExp): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    let done = false;
    const bound = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
      if (ready && !done && ready.test(err)) {
        done = true;
        const ms = performance.now() - t0;
        child.kill('SIGKILL');
        resolve(ms);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(bound);
      if (done) return;
      if (!ready && code === 0) resolve(performance.now() - t0);
      else reject(new Error(`${args.join(' ')} exited ${code} before it was ready: ${err.slice(0, 300)}`));
    });
  });
}

export const startupCase: BenchCase = {
  name: 'startup',
  title: 'Startup of the installed package: --help vs node -e 0, serve --ws listening vs bare node:http',
  async run(opts: CaseOptions): Promise<Row[]> {
    const rounds = bySize(opts.mode, { full: 21, quick: 9, tiny: 2 });
    const dir = mkdtempSync(join(tmpdir(), 'subrun-startup-'));
    try {
      const root = process.cwd();
      const packed = JSON.parse(
        execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' }),
      ) as Array<{ filename: string }>;
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'startup-bench', private: true, type: 'module' }));
      // better-sqlite3's native build (minutes from source) is this checkout's, for the same version and Node.
      execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', join(dir, packed[0]?.filename ?? '')], {
        cwd: dir,
        stdio: 'ignore',
      });
      cpSync(join(root, 'node_modules', 'better-sqlite3', 'build'), join(dir, 'node_modules', 'better-sqlite3', 'build'), { recursive: true });
      const bin = join(dir, 'node_modules', 'subrun', 'bin', 'subrun.js');
      opts.log(`startup: installed into a scratch project; ${rounds} interleaved rounds`);

      const help: number[] = [];
      const node: number[] = [];
      const serve: number[] = [];
      const http: number[] = [];
      // One warm-up round each, not counted: the first spawn pays for the disk cache.
      for (let i = -1; i < rounds; i++) {
        const h = await timeStart([bin, '--help'], dir);
        const n = await timeStart(['-e', '0'], dir);
        // Durable, as by default, in the scratch project: a bench never writes to the user's state directory.
        const s = await timeStart(
          [bin, 'serve', '--ws', '--port', '0', '--token', 'startup-bench-token', '--state-dir', join(dir, 'state')],
          dir,
          /listening on ws:/,
        );
        const b = await timeStart(['-e', BARE_HTTP], dir, /listening/);
        if (i < 0) continue;
        help.push(h);
        node.push(n);
        serve.push(s);
        http.push(b);
      }
      return [
        row({
          case: 'startup.help',
          figure: median(help),
          unit: 'ms',
          baseline: median(node),
          baseline_unit: 'ms (node -e 0)',
          goal: '<= 2',
          note: `median of ${rounds}, installed package`,
        }),
        row({
          case: 'startup.serve_ws',
          figure: median(serve),
          unit: 'ms',
          baseline: median(http),
          baseline_unit: 'ms (bare node:http listening)',
          goal: '<= 3',
          note: `median of ${rounds}, until "listening"`,
        }),
      ];
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
