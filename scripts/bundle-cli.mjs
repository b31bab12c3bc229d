// The `subrun` command's start-up bundle: dist/cli/main.js (tsc's output) and what it imports,
// zod, p-queue and nanoid included, in a few files under dist/bundle/, each subcommand's heavy
// parts (the ACP SDK, the NATS clients) in chunks loaded when that subcommand runs. A command that
// loads ~170 modules at start loads a handful: zod alone is 95 files, 64 of them locales that
// tree-shaking drops (bench/cases/startup.ts). The library's own entry points stay unbundled.
// pino and ws stay external: they load files of their own at run time; better-sqlite3 is a native addon;
// @opentelemetry/* and prom-client: one copy shared with the library (the API's global provider), and
// the SDK is loaded only when tracing is on.
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('../', import.meta.url));
const outdir = `${root}dist/bundle`;
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [`${root}dist/cli/main.js`],
  outdir,
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['pino', 'ws', '@nats-io/*', 'better-sqlite3', '@opentelemetry/*', 'prom-client'],
  legalComments: 'none',
  logLevel: 'warning',
});
