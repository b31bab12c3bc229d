// The package's name and version, read once from its package.json: the first one above this
// module (one level up from src/ and dist/; two from the benchmarks' compiled copy).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isRecord } from './guards.ts';

function packageJson(): { name: string; version: string } {
  for (let dir = dirname(dirname(fileURLToPath(import.meta.url))); ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg: unknown = JSON.parse(readFileSync(file, 'utf8'));
      if (isRecord(pkg) && typeof pkg.name === 'string' && typeof pkg.version === 'string') return { name: pkg.name, version: pkg.version };
    }
    // The root, and none found (a copy deployed without its package.json): never search on.
    if (dirname(dir) === dir) return { name: 'subrun', version: '0.0.0' };
  }
}

const pkg = packageJson();

export const SERVER_NAME: string = pkg.name;
export const VERSION: string = pkg.version;
