// The bench suite's plumbing, so it cannot rot silently: the pure helpers (medians, ratios, goals,
// the table), and every case run end to end at the `tiny` size through bench/run.ts (each case in
// its own process, the wire cases with their servers). Benchmarks are not tests: nothing here
// looks at how fast anything was, only that every case runs and reports well-formed rows.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CASES } from '../../bench/cases/index.ts';
import { runBench, type Results } from '../../bench/run.ts';
import { formatRatio, median, meetsGoal, percentile, ratio, row, table } from '../../bench/lib/stats.ts';
import { globs, globToRegExp } from '../../bench/cases/fanout.ts';
import { conservation } from '../../bench/cases/steer-load.ts';

describe('bench helpers', () => {
  it('medians and percentiles interpolate', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(percentile([1, 2, 3, 4, 5], 0)).toBe(1);
    expect(percentile([1, 2, 3, 4, 5], 100)).toBe(5);
    expect(percentile([10, 20], 99)).toBeCloseTo(19.9);
    expect(Number.isNaN(median([]))).toBe(true);
  });

  it('ratios and goals', () => {
    expect(ratio(3, 2)).toBe(1.5);
    expect(ratio(3, 0)).toBeNull();
    expect(ratio(3, null)).toBeNull();
    expect(meetsGoal(1.5, '<= 1.5')).toBe(true);
    expect(meetsGoal(1.51, '<= 1.5')).toBe(false);
    expect(meetsGoal(0.6, '>= 0.6')).toBe(true);
    expect(meetsGoal(0.59, '>= 0.6')).toBe(false);
    expect(meetsGoal(1, 'conservation holds')).toBeNull();
    expect(meetsGoal(null, '<= 1')).toBeNull();
    expect(formatRatio(0.000132)).toBe('0.00013');
  });

  it('rows carry the ratio and the verdict; the table prints them', () => {
    const r = row({ case: 'x.y', figure: 300, unit: 'ns', baseline: 100, baseline_unit: 'ns (base)', goal: '<= 2' });
    expect(r).toMatchObject({ case: 'x.y', figure: 300, baseline: 100, ratio: 3, goal: '<= 2', pass: false });
    const check = row({ case: 'c', figure: 5, unit: 'steers', goal: 'holds', pass: true });
    expect(check).toMatchObject({ baseline: null, ratio: null, pass: true });
    const text = table([r, check]);
    expect(text).toContain('x.y');
    expect(text).toContain('3.00x');
    expect(text.split('\n')).toHaveLength(4);
  });

  it('the fan-out globs match about 1% and the RegExp baseline agrees with the trie', () => {
    const { globs: gs, matching } = globs(1000);
    expect(gs).toHaveLength(1000);
    expect(matching).toBe(10);
    expect(gs.map(globToRegExp).filter((re) => re.test('agent.a0.text'))).toHaveLength(10);
    expect(globToRegExp('**.text').test('text')).toBe(true);
    expect(globToRegExp('a.**.z').test('a.z')).toBe(true);
    expect(globToRegExp('a.*.z').test('a.z')).toBe(false);
  });

  it('the conservation check catches a steer delivered twice, or both delivered and missed', () => {
    const base = () => ({
      queued: new Map([['st_1', { subagent_id: 'sa_1', text: 'a' }]]),
      rejectedTexts: new Set<string>(),
      delivered: new Map<string, number>(),
      missed: new Map<string, number>(),
      completed: new Map([['sa_1', 1]]),
      events: 0,
      queueFull: 0,
      errors: 0,
    });
    const ok = base();
    ok.delivered.set('st_1', 1);
    expect(conservation([ok]).ok).toBe(true);
    const twice = base();
    twice.delivered.set('st_1', 2);
    expect(conservation([twice]).ok).toBe(false);
    const both = base();
    both.delivered.set('st_1', 1);
    both.missed.set('a', 1);
    expect(conservation([both]).ok).toBe(false);
    expect(conservation([base()]).ok).toBe(false);
  });
});

describe('bench suite plumbing (tiny sizes, figures not looked at)', () => {
  it('runs every case end to end and writes well-formed rows', { timeout: 240_000 }, async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'subrun-bench-')), 'tiny.json');
    const logs: string[] = [];
    const results = await runBench({ mode: 'tiny', names: [], out, log: (m) => logs.push(m) });
    const written = JSON.parse(readFileSync(out, 'utf8')) as Results;
    expect(written.rows).toEqual(results.rows);
    expect(written.machine.cpus).toBeGreaterThan(0);
    expect(written.machine.node).toBe(process.version);
    const errors = results.rows.filter((r) => r.case.endsWith('.error'));
    expect(errors, logs.slice(-30).join('\n')).toEqual([]);
    for (const c of CASES) {
      const prefix = {
        registry: 'registry.',
        'tail-memory': 'tail.',
        'rpc-stdio': 'rpc.stdio.',
        'rpc-ws': 'rpc.ws.',
        fanout: 'fanout.',
        delegation: 'delegation.',
        'steer-load': 'steer.',
        'slow-consumer': 'slow.',
        'session-churn': 'session.',
        startup: 'startup.',
        http: 'http.',
        'scale-out': 'remote.',
        durability: 'durability.',
        'remote-restart': 'remote.restart',
        mcp: 'mcp.',
        otel: 'otel.',
      }[c.name];
      expect(prefix, `case ${c.name} has a row prefix`).toBeDefined();
      expect(
        results.rows.some((r) => r.case.startsWith(prefix as string)),
        `rows of ${c.name}`,
      ).toBe(true);
    }
    for (const r of results.rows) {
      expect(typeof r.figure, `${r.case}: ${JSON.stringify(r)}`).toBe('number');
      expect(r.unit.length).toBeGreaterThan(0);
      expect([true, false, null]).toContain(r.pass);
      if (r.baseline !== null) expect(r.baseline_unit).toBeTruthy();
    }
  });
});
