// What every case module exports, and the sizes of the three modes.
import type { Row } from './stats.ts';

/**
 * full: the sizes the issue names (a few minutes for the whole suite).
 * quick: the same shape at smaller sizes and budgets (well under a minute).
 * tiny: only the plumbing, for test/package/bench.test.ts; its figures mean nothing.
 */
export type Mode = 'full' | 'quick' | 'tiny';

export interface CaseOptions {
  readonly mode: Mode;
  /** Progress lines (stderr); never part of the results. */
  readonly log: (message: string) => void;
}

export interface BenchCase {
  /** The name used on the command line and as the prefix of its rows. */
  readonly name: string;
  readonly title: string;
  run(opts: CaseOptions): Promise<Row[]>;
}

/** Picks the value for the mode. */
export function bySize<T>(mode: Mode, sizes: { readonly full: T; readonly quick: T; readonly tiny: T }): T {
  return sizes[mode];
}
