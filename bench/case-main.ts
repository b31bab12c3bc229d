// Runs ONE case in this process and prints its rows as one JSON line on stdout (progress goes to
// stderr). bench/run.ts starts one such process per case, so no case inherits another's heap,
// JIT state or leftover timers. Usage: node --expose-gc --import tsx bench/case-main.ts NAME [--quick|--tiny]
import type { Mode } from './lib/case.ts';
import { findCase } from './cases/index.ts';

const args = process.argv.slice(2);
const name = args.find((a) => !a.startsWith('--'));
const mode: Mode = args.includes('--tiny') ? 'tiny' : args.includes('--quick') ? 'quick' : 'full';
const c = name ? findCase(name) : undefined;
if (!c) {
  process.stderr.write(`unknown case ${JSON.stringify(name)}\n`);
  process.exit(2);
}
const rows = await c.run({ mode, log: (m) => process.stderr.write(`  ${m}\n`) });
process.stdout.write(`${JSON.stringify({ case: c.name, rows })}\n`);
// Servers and sockets a case started are closed by the case; exit anyway so a stray handle
// cannot keep the suite waiting.
process.exit(0);
