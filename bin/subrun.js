#!/usr/bin/env node
// The `subrun` command. The sources are TypeScript run directly (through tsx), so a clone needs no
// build step; this file only registers the loader and hands over to src/cli.ts.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
process.exitCode = await main(process.argv.slice(2));
