// `npm run bench`: runs every case (or those named), each in its own node process (so no case
// inherits another's heap, JIT state or timers), prints the table of ratios and writes
// bench/results/latest.json.
//
//   npm run bench                       every case, full sizes (a few minutes)
//   npm run bench -- --quick            every case, smaller sizes and budgets (about a minute)
//   npm run bench -- registry fanout    only these cases
//   npm run bench -- --out FILE         write the JSON elsewhere
//
// Benchmarks are not tests: the exit code is 0 whether or not the goals are met, and non-zero only
// when a case could not run.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CASES } from './cases/index.ts';
import type { Mode } from './lib/case.ts';
import { row, table, type Row } from './lib/stats.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');

export interface RunOptions {
  readonly mode: Mode;
  readonly names: readonly string[];
  readonly out: string;
  readonly log?: (m: string) => void;
}

export interface Results {
  readonly machine: { readonly cpus: number; readonly cpu_model: string; readonly memory_gib: number; readonly node: string; readonly platform: string };
  readonly mode: Mode;
  readonly started_at: string;
  readonly duration_s: number;
  /** 1-minute load average at the start and at the end: how busy the machine was. */
  readonly loadavg: readonly [number, number];
  readonly rows: Row[];
}

/** Per-case wall-clock bound; a case past it is killed and reported as an error row. */
const CASE_BOUND_MS: Record<Mode, number> = { full: 8 * 60_000, quick: 3 * 60_000, tiny: 60_000 };

/** Compiles src/ and bench/ to .bench-build/ (incremental): the cases run the compiled code. */
function buildBench(): void {
  execFileSync(process.execPath, [resolve(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.bench.json'], { cwd: ROOT, stdio: 'inherit' });
}

function runCase(name: string, mode: Mode, log: (m: string) => void): Promise<Row[]> {
  const args = ['--expose-gc', '--max-old-space-size=16384', resolve(ROOT, '.bench-build', 'bench', 'case-main.js'), name];
  if (mode !== 'full') args.push(`--${mode}`);
  return new Promise((resolveRows) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
      for (const line of d.split('\n')) if (line.trim()) log(line);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), CASE_BOUND_MS[mode]);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      const last = out.trim().split('\n').pop() ?? '';
      try {
        const parsed = JSON.parse(last) as { rows: Row[] };
        if (code === 0) return resolveRows(parsed.rows);
      } catch {
        // fall through
      }
      const why =
        signal === 'SIGKILL' ? `killed after ${CASE_BOUND_MS[mode] / 1000} s` : `exit ${code ?? signal}: ${err.trim().split('\n').slice(-3).join(' | ')}`;
      resolveRows([row({ case: `${name}.error`, figure: Number.NaN, unit: '', goal: 'runs', pass: false, note: why })]);
    });
  });
}

export async function runBench(opts: RunOptions): Promise<Results> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const selected =
    opts.names.length === 0
      ? CASES
      : opts.names.map((n) => {
          const c = CASES.find((x) => x.name === n);
          if (!c) throw new Error(`unknown case ${JSON.stringify(n)}; known: ${CASES.map((x) => x.name).join(', ')}`);
          return c;
        });
  buildBench();
  const started = new Date();
  const load0 = loadavg()[0] as number;
  const rows: Row[] = [];
  for (const c of selected) {
    log(`== ${c.name}: ${c.title}`);
    const t0 = performance.now();
    rows.push(...(await runCase(c.name, opts.mode, log)));
    log(`   (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }
  const results: Results = {
    machine: {
      cpus: cpus().length,
      cpu_model: cpus()[0]?.model ?? 'unknown',
      memory_gib: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
    },
    mode: opts.mode,
    started_at: started.toISOString(),
    duration_s: Math.round((Date.now() - started.getTime()) / 100) / 10,
    loadavg: [Math.round(load0 * 100) / 100, Math.round((loadavg()[0] as number) * 100) / 100],
    rows,
  };
  mkdirSync(dirname(opts.out), { recursive: true });
  writeFileSync(opts.out, `${JSON.stringify(results, null, 2)}\n`);
  return results;
}

export function parseArgs(argv: readonly string[]): RunOptions {
  const names: string[] = [];
  let mode: Mode = 'full';
  let out = resolve(HERE, 'results', 'latest.json');
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--quick') mode = 'quick';
    else if (a === '--tiny') mode = 'tiny';
    else if (a === '--out') out = resolve(argv[++i] ?? out);
    else if (a.startsWith('--')) throw new Error(`unknown option ${a}`);
    else names.push(a);
  }
  return { mode, names, out };
}

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const opts = parseArgs(process.argv.slice(2));
  const r = await runBench(opts);
  const m = r.machine;
  process.stdout.write(
    `\nsubrun bench (${r.mode}) on ${m.cpus} cores (${m.cpu_model}), ${m.memory_gib} GiB, node ${m.node}; load ${r.loadavg[0]} -> ${r.loadavg[1]}; ${r.duration_s} s\n\n`,
  );
  process.stdout.write(`${table(r.rows)}\n\n`);
  for (const x of r.rows) if (x.note) process.stdout.write(`  ${x.case}: ${x.note}\n`);
  process.stdout.write(`\nwritten to ${opts.out}\n`);
  const missed = r.rows.filter((x) => x.pass === false).map((x) => x.case);
  if (missed.length > 0) process.stdout.write(`goals not met: ${missed.join(', ')}\n`);
  process.exitCode = r.rows.some((x) => x.case.endsWith('.error')) ? 1 : 0;
}
