// The demo and the command line, run as real child processes the way a person runs them.
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runDemo } from '../../src/cli/demo.ts';
import { completionEntrySchema } from '../../src/contract/wire.ts';

const bin = fileURLToPath(new URL('../../bin/subrun.js', import.meta.url));
const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 60_000 });

/** The pretty-printed JSON objects the demo prints after its roster. */
function entriesIn(stdout: string): unknown[] {
  const tail = stdout.slice(stdout.indexOf('Completion entries'));
  return [...tail.matchAll(/^\{\n[\s\S]*?^\}$/gm)].map((m) => JSON.parse(m[0]));
}

describe('subrun demo', () => {
  it('runs the whole story and exits 0', () => {
    const r = run('demo', '--fast');
    expect(r.status, r.stderr).toBe(0);
    const entries = entriesIn(r.stdout).map((e) => completionEntrySchema.parse(e));
    expect(entries).toHaveLength(4);
    const [research, summarize, crawl, grandchild] = entries;
    // The steered child took the steer: delivered, not missed.
    expect(research?.status).toBe('completed');
    expect(research?.missed_steer).toBeUndefined();
    expect(r.stdout).toMatch(/delivered to sa_\w+: "Focus on section 5/);
    // The child that finished first got its steer back.
    expect(summarize?.status).toBe('completed');
    expect(summarize?.missed_steer).toBe('Keep it under 100 words.');
    expect(summarize?.summary).toContain('[steer did not land — the subagent finished before it could be delivered: Keep it under 100 words.]');
    // The interrupted subtree: parent and grandchild.
    expect(crawl?.status).toBe('interrupted');
    expect(grandchild?.status).toBe('interrupted');
    expect(r.stdout).toMatch(new RegExp(`stopped \\[${crawl?.subagent_id}, ${grandchild?.subagent_id}\\]`));
    // Not a terminal: the story once, line by line, then the roster once (never redrawn).
    expect(r.stdout.match(/status\s+tools\s+last tool/g)).toHaveLength(1);
    expect(r.stdout).not.toContain('\x1b[');
    expect(r.stdout).toMatch(new RegExp(`${crawl?.subagent_id}\\s+interrupted\\*\\s+1\\s+fetch_index`));
    // And it says why the steer missed.
    expect(r.stdout).toContain(`${summarize?.subagent_id} finished: completed; its steer missed: it was sent during a step with no delivery point`);
  });

  it('on a terminal, redraws a live roster in place while the children run', async () => {
    const chunks: string[] = [];
    const out = Object.assign(
      new Writable({
        write(chunk: Buffer, _enc, done) {
          chunks.push(chunk.toString('utf8'));
          done();
        },
      }),
      { isTTY: true },
    );
    expect(await runDemo({ fast: true, out })).toBe(0);
    const text = chunks.join('');
    // Cursor up and clear: the roster is drawn over itself, many times.
    expect(text.match(/\x1b\[\d+A\x1b\[J/g)?.length ?? 0).toBeGreaterThan(3);
    expect(text).toMatch(/running\s+1\s+fetch_page/);
  });

  it('on a model that cannot be reached, exits 1 with one line saying so', async () => {
    const port = await closedPort();
    const r = run('demo', '--base-url', `http://127.0.0.1:${port}/v1`, '--model', 'none');
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^subrun: demo failed: 3 of 3 children ended failed: cannot reach the model server/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

/** A port on 127.0.0.1 nobody listens on (it was just free). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('subrun command line', () => {
  it('prints the version', () => {
    const r = run('--version');
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('refuses an unknown command with exit 2 and a reason on stderr', () => {
    const r = run('frobnicate');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
  });
});
