// src/version.ts reads the package's name and version from the first package.json above it. A copy
// of it with no package.json above it (a bundle deployed on its own) must start with the
// fallback, never search past the filesystem's root for ever.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** src/version.ts and its one import, copied to `root/lib/` as .mts (no package.json says ESM); what importing it prints. */
function importCopy(root: string): ReturnType<typeof spawnSync> {
  const lib = join(root, 'lib');
  mkdirSync(lib, { recursive: true });
  copyFileSync(join('src', 'guards.ts'), join(lib, 'guards.mts'));
  writeFileSync(join(lib, 'version.mts'), readFileSync(join('src', 'version.ts'), 'utf8').replace("'./guards.ts'", "'./guards.mts'"));
  const code = `const v = await import(${JSON.stringify(join(lib, 'version.mts'))}); console.log(v.SERVER_NAME, v.VERSION);`;
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 10_000 });
}

describe('the version module', () => {
  it('falls back to subrun 0.0.0 when no package.json is above it, at once', () => {
    const root = mkdtempSync(join(tmpdir(), 'subrun-version-'));
    dirs.push(root);
    const r = importCopy(root);
    expect(r.signal).toBeNull();
    expect(String(r.stdout).trim()).toBe('subrun 0.0.0');
  });

  it('reads the first package.json above it', () => {
    const root = mkdtempSync(join(tmpdir(), 'subrun-version-'));
    dirs.push(root);
    writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'embedded', version: '9.9.9' }));
    const r = importCopy(root);
    expect(String(r.stdout).trim()).toBe('embedded 9.9.9');
  });
});
