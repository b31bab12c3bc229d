#!/usr/bin/env node
// The `subrun` command: the compiled CLI (dist/, made by `npm run build`; `npm test` and
// `npm pack` build it first). From a clone, `npm start` and `npx tsx src/cli/main.ts` run the sources.
import { main } from '../dist/cli/main.js';

process.exitCode = await main(process.argv.slice(2));
