// Vitest's global setup: compiles src/ to dist/ before any test runs, so the tests that start
// `subrun` as a process run the same JavaScript the package ships (bin/subrun.js -> dist/), and a
// test run never sees a stale build. Incremental: a few hundred ms when nothing changed.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  execFileSync(process.execPath, [fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url)), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  // The bin runs the start-up bundle made from that output (scripts/bundle-cli.mjs).
  execFileSync(process.execPath, ['scripts/bundle-cli.mjs'], { cwd: root, stdio: 'inherit' });
}
