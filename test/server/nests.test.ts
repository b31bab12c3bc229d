// nestsDeeperThan (src/guards.ts), which every method call's params pass: a flat object takes the
// short path and answers as the walk does; anything nested is walked to its depth.
import { describe, expect, it } from 'vitest';
import { nestsDeeperThan } from '../../src/guards.ts';

const nest = (levels: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < levels; i++) v = i % 2 === 0 ? { v } : [v];
  return v;
};

describe('nestsDeeperThan', () => {
  it('a flat object is within any bound above 0, and past a bound of 0', () => {
    const flat = { session_id: 'se_1', subagent_id: 'sa_1', text: 'go', n: 1, none: null };
    expect(nestsDeeperThan(flat, 1)).toBe(false);
    expect(nestsDeeperThan(flat, 256)).toBe(false);
    expect(nestsDeeperThan(flat, 0)).toBe(true);
    expect(nestsDeeperThan('text', 0)).toBe(false);
  });

  it('counts the levels of objects and arrays alike, however deep', () => {
    expect(nestsDeeperThan(nest(3), 3)).toBe(false);
    expect(nestsDeeperThan(nest(4), 3)).toBe(true);
    expect(nestsDeeperThan({ a: 1, b: nest(256) }, 256)).toBe(true);
    expect(nestsDeeperThan({ a: 1, b: nest(255) }, 256)).toBe(false);
    expect(nestsDeeperThan(nest(20_000), 256)).toBe(true);
  });

  it('reads own values only, as Object.values does, whatever the prototype holds', () => {
    const proto = { deep: nest(10) };
    const own: Record<string, unknown> = Object.create(proto) as Record<string, unknown>;
    own.text = 'go';
    expect(nestsDeeperThan(own, 2)).toBe(false);
    own.deep = nest(3);
    expect(nestsDeeperThan(own, 2)).toBe(true);
  });
});
