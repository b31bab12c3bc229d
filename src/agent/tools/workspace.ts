// The built-in tools, rooted at a workspace directory: read_file, list_dir, search_text. No path
// may leave the workspace: not with `..`, not as an absolute path, not through a symlink that
// points outside. Every output is bounded.
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import { defineTool, type Tool } from './tool.ts';

const MAX_READ_BYTES = 64 * 1024;
const MAX_ENTRIES = 500;
const MAX_MATCHES = 200;
const MAX_FILES_SCANNED = 5000;
const MAX_SCAN_BYTES = 1024 * 1024;

export class WorkspaceError extends Error {
  override readonly name = 'WorkspaceError';
}

/** Resolves `path` inside `root` (both real paths), or throws a WorkspaceError saying why not. */
export async function resolveInside(root: string, path: string): Promise<string> {
  if (path.includes('\0')) throw new WorkspaceError('path contains a NUL byte');
  if (isAbsolute(path)) throw new WorkspaceError(`absolute paths are not allowed (${path}); use a path relative to the workspace`);
  const realRoot = await realpath(root);
  const target = resolve(realRoot, path);
  if (!inside(realRoot, target)) throw new WorkspaceError(`${path} is outside the workspace`);
  let real: string;
  try {
    real = await realpath(target);
  } catch {
    throw new WorkspaceError(`${path} does not exist`);
  }
  if (!inside(realRoot, real)) throw new WorkspaceError(`${path} leads outside the workspace (through a symlink)`);
  return real;
}

/**
 * Lines `from` (0-based) to `from + count` of a file, scanned in chunks so that offset reaches
 * every line of a large file while at most MAX_READ_BYTES characters of line text are kept.
 */
async function readLines(file: string, from: number, count: number): Promise<{ lines: string[]; stopped: boolean }> {
  const fh = await open(file, 'r');
  const decoder = new StringDecoder('utf8');
  const buf = Buffer.alloc(64 * 1024);
  const lines: string[] = [];
  let index = 0;
  let current = '';
  let kept = 0;
  try {
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      const parts = (bytesRead === 0 ? decoder.end() : decoder.write(buf.subarray(0, bytesRead))).split('\n');
      for (const [i, part] of parts.entries()) {
        if (index >= from) current += part;
        if (index >= from && kept + current.length > MAX_READ_BYTES) {
          lines.push(current.slice(0, MAX_READ_BYTES - kept));
          return { lines, stopped: true };
        }
        if (i < parts.length - 1 || bytesRead === 0) {
          if (index >= from) {
            lines.push(current);
            kept += current.length + 1;
            if (lines.length >= count) return { lines, stopped: false };
          }
          current = '';
          index += 1;
        }
      }
      if (bytesRead === 0) return { lines, stopped: false };
    }
  } finally {
    await fh.close();
  }
}

function inside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

export function workspaceTools(root: string): Tool[] {
  const readFile = defineTool({
    name: 'read_file',
    description: 'Read a text file in the workspace. Returns numbered lines. Use offset/limit (line numbers) for large files.',
    schema: z.strictObject({
      path: z.string().min(1).describe('path relative to the workspace'),
      offset: z.number().int().min(1).optional().describe('first line to return (1-based)'),
      limit: z.number().int().min(1).max(5000).optional().describe('how many lines to return'),
    }),
    async handler({ path, offset, limit }) {
      const file = await resolveInside(root, path);
      const info = await stat(file);
      if (!info.isFile()) throw new WorkspaceError(`${path} is not a file`);
      const from = (offset ?? 1) - 1;
      const { lines, stopped } = await readLines(file, from, limit ?? 2000);
      const body = lines.map((l, i) => `${from + i + 1}\t${l}`).join('\n');
      const last = from + lines.length;
      const more = stopped ? `\n[stopped after ${MAX_READ_BYTES} characters, inside line ${last}; the next line is ${last + 1}]` : '';
      return body + more;
    },
  });

  const listDir = defineTool({
    name: 'list_dir',
    description: 'List a directory in the workspace ("." is the workspace root). Directories end with "/".',
    schema: z.strictObject({ path: z.string().min(1).describe('directory relative to the workspace') }),
    async handler({ path }) {
      const dir = await resolveInside(root, path);
      const entries = await readdir(dir, { withFileTypes: true });
      const names = entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name)).sort();
      const shown = names.slice(0, MAX_ENTRIES).join('\n');
      return names.length > MAX_ENTRIES ? `${shown}\n[${names.length - MAX_ENTRIES} more entries]` : shown || '(empty)';
    },
  });

  const searchText = defineTool({
    name: 'search_text',
    description: 'Search files in the workspace for a regular expression (JavaScript syntax). Returns path:line: text.',
    schema: z.strictObject({
      pattern: z.string().min(1).max(500),
      path: z.string().min(1).optional().describe('file or directory to search, relative to the workspace (default ".")'),
    }),
    async handler({ pattern, path }, ctx) {
      let re: RegExp;
      try {
        re = new RegExp(pattern);
      } catch (err) {
        throw new WorkspaceError(`invalid pattern: ${err instanceof Error ? err.message : String(err)}`);
      }
      const realRoot = await realpath(root);
      const start = await resolveInside(root, path ?? '.');
      const matches: string[] = [];
      let scanned = 0;
      const walk = async (p: string): Promise<void> => {
        if (matches.length >= MAX_MATCHES || scanned >= MAX_FILES_SCANNED || ctx.signal.aborted) return;
        const info = await stat(p);
        if (info.isDirectory()) {
          for (const e of (await readdir(p, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
            if (e.name === 'node_modules' || e.name === '.git') continue;
            if (e.isSymbolicLink()) continue;
            await walk(join(p, e.name));
          }
          return;
        }
        if (!info.isFile() || info.size > MAX_SCAN_BYTES) return;
        scanned += 1;
        const fh = await open(p, 'r');
        try {
          const text = (await fh.readFile()).toString('utf8');
          if (text.includes('\0')) return;
          text.split('\n').forEach((line, i) => {
            if (matches.length < MAX_MATCHES && re.test(line)) matches.push(`${relative(realRoot, p)}:${i + 1}: ${line.slice(0, 300)}`);
          });
        } finally {
          await fh.close();
        }
      };
      await walk(start);
      if (matches.length === 0) return 'no matches';
      return matches.length >= MAX_MATCHES ? `${matches.join('\n')}\n[stopped at ${MAX_MATCHES} matches]` : matches.join('\n');
    },
  });

  return [readFile, listDir, searchText];
}
