// Pure helpers of the bench suite: medians and percentiles, the result row, ratio and pass
// evaluation, and the printed table. No timing here, so test/package/bench.test.ts can hold them.

/** One row of bench/results/latest.json. */
export interface Row {
  /** Case and measurement, e.g. `registry.steer@100k`. */
  readonly case: string;
  readonly figure: number;
  readonly unit: string;
  /** What the figure is compared with (measured in the same run); null when there is none. */
  readonly baseline: number | null;
  readonly baseline_unit: string | null;
  /** figure / baseline (for throughputs: figure over baseline too, so higher is better there). */
  readonly ratio: number | null;
  /** The goal as text, e.g. `<= 1.5` or `>= 0.6`, or a check such as `conservation holds`. */
  readonly goal: string;
  /** null when the row carries no goal (informational). */
  readonly pass: boolean | null;
  /** Free-form detail (counts, the baseline's name, the machine's load). */
  readonly note?: string;
}

export interface RowInput {
  readonly case: string;
  readonly figure: number;
  readonly unit: string;
  readonly baseline?: number | null;
  readonly baseline_unit?: string | null;
  /** `<= X` (ratio at most X), `>= X` (ratio at least X), or omitted (no ratio goal). */
  readonly goal?: string;
  /** Overrides the ratio check (for goals that are checks, not ratios). */
  readonly pass?: boolean | null;
  readonly note?: string;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Linear-interpolated percentile (p in 0..100) of the values; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (Math.min(100, Math.max(0, p)) / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (rank - lo);
}

export function ratio(figure: number, baseline: number | null | undefined): number | null {
  if (baseline === null || baseline === undefined || !Number.isFinite(baseline) || baseline === 0 || !Number.isFinite(figure)) return null;
  return figure / baseline;
}

/** Evaluates `<= X` / `>= X` against a ratio; null when there is no such goal or no ratio. */
export function meetsGoal(r: number | null, goal: string | undefined): boolean | null {
  if (!goal || r === null) return null;
  const m = /^\s*(<=|>=)\s*([0-9.]+)\s*$/.exec(goal);
  if (!m) return null;
  const bound = Number(m[2]);
  return m[1] === '<=' ? r <= bound : r >= bound;
}

export function row(input: RowInput): Row {
  const baseline = input.baseline ?? null;
  const r = ratio(input.figure, baseline);
  const pass = input.pass !== undefined ? input.pass : meetsGoal(r, input.goal);
  return {
    case: input.case,
    figure: round(input.figure),
    unit: input.unit,
    baseline: baseline === null ? null : round(baseline),
    baseline_unit: baseline === null ? null : (input.baseline_unit ?? input.unit),
    ratio: r === null ? null : round(r, 3),
    goal: input.goal ?? '',
    pass,
    ...(input.note ? { note: input.note } : {}),
  };
}

/** Rounds to `digits` significant decimals after the point for small numbers, integers for big ones. */
export function round(value: number, digits = 4): number {
  if (!Number.isFinite(value)) return value;
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value);
  if (abs === 0) return 0;
  const places = Math.max(0, digits - 1 - Math.floor(Math.log10(abs)));
  const f = 10 ** Math.min(places, 9);
  return Math.round(value * f) / f;
}

export function formatNumber(value: number | null): string {
  if (value === null) return '—';
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${(value / 1e6).toFixed(2)}M`;
  if (abs >= 1e4) return `${(value / 1e3).toFixed(1)}k`;
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 1) return value.toFixed(2);
  return value.toPrecision(3);
}

export function formatRatio(r: number): string {
  if (r >= 100) return r.toFixed(0);
  if (r >= 0.01 || r === 0) return r.toFixed(2);
  return r.toPrecision(2);
}

/** The printed table: one line per row, columns padded. */
export function table(rows: readonly Row[]): string {
  const head = ['case', 'figure', 'baseline', 'ratio', 'goal', 'pass'];
  const lines = rows.map((r) => [
    r.case,
    `${formatNumber(r.figure)} ${r.unit}`,
    r.baseline === null ? '—' : `${formatNumber(r.baseline)} ${r.baseline_unit ?? ''}`,
    r.ratio === null ? '—' : `${formatRatio(r.ratio)}x`,
    r.goal || '—',
    r.pass === null ? '—' : r.pass ? 'yes' : 'NO',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const fmt = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [fmt(head), fmt(widths.map((w) => '-'.repeat(w))), ...lines.map(fmt)].join('\n');
}
