// Files stay small: every source file under src/ is split by stage of the data flow before it
// passes 400 lines (docs/architecture.md).
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.ts';

const MAX_LINES = 400;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

const lines = (text: string) => text.split('\n').length - (text.endsWith('\n') ? 1 : 0);

describe('source files', () => {
  it('counts lines as wc -l does (the check itself)', () => {
    expect(lines('a\nb\n')).toBe(2);
    expect(lines('a\nb')).toBe(2);
  });

  it(`are at most ${MAX_LINES} lines each`, () => {
    const files = sources(join(ROOT, 'src'));
    expect(files.length).toBeGreaterThan(40);
    const long = files.map((f) => ({ file: relative(ROOT, f), lines: lines(readFileSync(f, 'utf8')) })).filter((f) => f.lines > MAX_LINES);
    expect(long).toEqual([]);
  });
});
