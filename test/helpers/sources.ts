// The TypeScript sources under a directory, for the tests that read src/ as text (casts, imports,
// spread shapes): every .ts file but declarations, as absolute paths.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

export function tsSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return tsSources(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}
