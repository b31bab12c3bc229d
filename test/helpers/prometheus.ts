// The Prometheus text format read by a parser that is not ours (parse-prometheus-text-format), so
// a test of /metrics checks what Prometheus itself would read.
// @ts-expect-error -- the parser ships no types; its output is described below and checked by the tests that read it
import parse from 'parse-prometheus-text-format';

export interface Sample {
  readonly labels?: Record<string, string>;
  readonly value?: string;
  readonly buckets?: Record<string, string>;
  readonly count?: string;
  readonly sum?: string;
}

export interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
  readonly metrics: readonly Sample[];
}

export function parseMetrics(text: string): Map<string, Family> {
  const families: Family[] = parse(text);
  return new Map(families.map((f) => [f.name, f]));
}

/** The value of the one sample of `name` whose labels include `labels`; undefined if none. */
export function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const f = families.get(name);
  const s = f?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (s === undefined) return undefined;
  return Number(s.value ?? s.count);
}
