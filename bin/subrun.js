#!/usr/bin/env node
// The `subrun` command: the compiled CLI, bundled for start-up (dist/bundle/, made by
// `npm run build`; a clone builds it on `npm ci` / `npm install` (the `prepare` script), and
// `npm test` and `npm pack` build it too). From a clone, `npm start` and `npx tsx src/cli/main.ts`
// run the sources.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const bundle = new URL('../dist/bundle/main.js', import.meta.url);
if (!existsSync(fileURLToPath(bundle))) {
  // A clone installed with scripts off (--ignore-scripts), or a build removed: one line, no stack.
  const root = fileURLToPath(new URL('..', import.meta.url));
  process.stderr.write(`subrun: not built yet: run \`npm run build\` in ${root} (a clone builds on \`npm ci\`)\n`);
  process.exit(2);
}
const { main } = await import(bundle.href);
process.exitCode = await main(process.argv.slice(2));
