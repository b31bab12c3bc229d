#!/usr/bin/env node
// The `subrun` command: the compiled CLI, bundled for start-up (dist/bundle/, made by
// `npm run build`; `npm test` and `npm pack` build it first). From a clone, `npm start` and
// `npx tsx src/cli/main.ts` run the sources.
import { main } from '../dist/bundle/main.js';

process.exitCode = await main(process.argv.slice(2));
