// The demo and the command line, run as real child processes the way a person runs them.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { completionEntrySchema } from '../src/rpc/protocol.ts';

const bin = fileURLToPath(new URL('../bin/subrun.js', import.meta.url));
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
    // A live roster was printed while they ran.
    expect(r.stdout).toMatch(/status\s+tools\s+last tool/);
    expect(r.stdout).toMatch(/running\s+1\s+fetch_page/);
  });
});

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
