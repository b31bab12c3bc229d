// Case 16, the cost of telemetry (docs/observability.md, "Overhead budget"), as A/B ratios in one
// process, alternating, medians:
// - delegation: 10,000 no-op scripted children at concurrency 64 (case 6's run), per child;
// - steer: one child parked in `wait_steer`, steered one steer at a time, each timed from
//   steer() to its `subagent.steer.delivered` event, p50 and p99;
// each with (a) no SDK registered (the API's no-op tracer: what every library user pays) and
// (b) a BasicTracerProvider + BatchSpanProcessor + InMemorySpanExporter, against (0) the same
// build with the runtime's telemetry hooks bypassed: every method of Traces replaced by an empty
// one, so no span, no context, no attribute object is made (what is left is one call into an
// empty method per hook, a few ns). The commit before tracing cannot run in this process, so (0)
// is the honest stand-in for "telemetry compiled out".
// An A/A run (the bypassed build against itself) gives the noise floor of those ratios.
// - scrape: GET /metrics's work (Metrics.scrape(): the registry's text) with 10,000 live children.
// The API's proxy tracer keeps the first real tracer it is given, so (a) runs before (b).
import { ROOT_CONTEXT, SpanKind, trace, type Span } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { createRuntime } from '../../src/delegation/runtime.ts';
import { NO_RUN, NO_TURN } from '../../src/telemetry/observer.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';
import { Traces } from '../../src/telemetry/traces.ts';
import type { Owner } from '../../src/types.ts';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { median, percentile, row, type Row } from '../lib/stats.ts';
import { runSubrun } from './delegation.ts';

const OWNER: Owner = { session_id: 'ses_bench', transport: 'tr_bench', generation: 1 };
const HOOKS = [
  'delegated',
  'created',
  'started',
  'finished',
  'delegationDone',
  'steerQueued',
  'steerDelivered',
  'steerWithdrawn',
  'steerRejected',
  'interrupted',
];
const noop = () => undefined;
const saved = new Map<string, unknown>([...HOOKS, 'run', 'turn'].map((m) => [m, Reflect.get(Traces.prototype, m)]));

/** Replaces every Traces hook by an empty one (true), or puts the real ones back (false). */
function bypass(on: boolean): void {
  for (const m of HOOKS) Reflect.set(Traces.prototype, m, on ? noop : saved.get(m));
  Reflect.set(Traces.prototype, 'run', on ? () => NO_RUN : saved.get('run'));
  Reflect.set(Traces.prototype, 'turn', on ? () => NO_TURN : saved.get('turn'));
}

const gc = (): void => (Reflect.get(globalThis, 'gc') as (() => void) | undefined)?.();

/** `n` steers to one child parked in wait_steer, one at a time; each round trip in µs. */
async function steerRun(n: number): Promise<number[]> {
  const rt = createRuntime({});
  const steps = [...Array.from({ length: n }, () => ({ op: 'wait_steer', timeout_ms: 60_000 })), { op: 'finish' }];
  const h = rt.delegate([{ goal: 'steered', agent: { kind: 'scripted', steps } }], { owner: OWNER });
  const id = h.subagent_ids[0] ?? '';
  let wake: (() => void) | undefined;
  const off = rt.events.subscribe('subagent.steer.delivered', () => wake?.());
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const delivered = new Promise<void>((resolve) => (wake = resolve));
    const t0 = performance.now();
    if (rt.steer(id, `steer ${i}`).status !== 'queued') throw new Error('steer rejected');
    await delivered;
    lat.push((performance.now() - t0) * 1000);
  }
  off();
  const [entry] = await h.results;
  if (entry?.status !== 'completed') throw new Error(`the steered child ended ${entry?.status ?? 'without an entry'}`);
  return lat;
}

interface Side {
  readonly perChild: number[];
  readonly p50: number[];
  readonly p99: number[];
}

/**
 * Alternates the bypassed build (0) and the variant (a or b) for `rounds`, fresh runtimes each;
 * `control`: the variant is the bypassed build too (an A/A run: the noise floor of the ratios).
 */
async function ab(rounds: number, n: number, steers: number, control = false): Promise<{ base: Side; with: Side }> {
  const base: Side = { perChild: [], p50: [], p99: [] };
  const variant: Side = { perChild: [], p50: [], p99: [] };
  const one = async (side: Side, off: boolean) => {
    bypass(off);
    gc();
    side.perChild.push((await runSubrun(n)) / n);
    gc();
    const lat = await steerRun(steers);
    side.p50.push(percentile(lat, 50));
    side.p99.push(percentile(lat, 99));
  };
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      await one(base, true);
      await one(variant, control);
    } else {
      await one(variant, control);
      await one(base, true);
    }
  }
  bypass(false);
  return { base, with: variant };
}

function rows(tag: string, what: string, r: { base: Side; with: Side }, goal: string, note: string): Row[] {
  const baseline = `(telemetry hooks bypassed)`;
  return [
    row({
      case: `otel.${tag}.delegation_per_child`,
      figure: median(r.with.perChild) * 1000,
      unit: `µs/child, ${what}`,
      baseline: median(r.base.perChild) * 1000,
      baseline_unit: `µs/child ${baseline}`,
      goal,
      note,
    }),
    row({
      case: `otel.${tag}.steer_p50`,
      figure: median(r.with.p50),
      unit: `µs, ${what}`,
      baseline: median(r.base.p50),
      baseline_unit: `µs ${baseline}`,
      goal,
    }),
    row({
      case: `otel.${tag}.steer_p99`,
      figure: median(r.with.p99),
      unit: `µs, ${what}`,
      baseline: median(r.base.p99),
      baseline_unit: `µs ${baseline}`,
      // Issue 23's goals are on the case's figures (per child, the steer's p50); the tail is shown
      // without one: its A/A noise alone reaches 1.2-2x on this machine, and with the SDK it holds
      // the BatchSpanProcessor's export of a full batch, which runs on the same event loop.
      note: 'no goal: the tail (see the A/A row for its noise)',
    }),
  ];
}

/**
 * The SDK's own work for what the design asks per child, made straight on the registered tracer:
 * an `invoke_agent` span with the same start attributes, its `subrun.started` event, its end
 * attributes, and a 64th of a delegation span, all n open at once as the case's children are.
 * µs per child, the median of `rounds` runs of `n`.
 * No runtime can trace a child for less with this SDK.
 */
function spanFloorUs(n: number, rounds: number): number {
  const tracer = trace.getTracer('bench-floor');
  const per: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    // The design's lifetimes, as the case makes them: every child is created (queued) at once,
    // so all n spans are open together; each starts, then each is sealed.
    const delegations: Span[] = [];
    const children: Span[] = [];
    for (let i = 0; i < n; i += 64) {
      const d = tracer.startSpan(
        'subrun.delegation',
        { kind: SpanKind.INTERNAL, attributes: { 'subrun.delegation.id': `dg_${i}`, 'subrun.delegation.task_count': 64 } },
        ROOT_CONTEXT,
      );
      delegations.push(d);
      const parent = trace.setSpan(ROOT_CONTEXT, d);
      for (let j = 0; j < 64 && i + j < n; j++) {
        children.push(
          tracer.startSpan(
            'invoke_agent',
            {
              kind: SpanKind.INTERNAL,
              attributes: {
                'gen_ai.operation.name': 'invoke_agent',
                'gen_ai.provider.name': 'subrun',
                'gen_ai.agent.id': `sa_${i + j}`,
                'gen_ai.request.model': 'scripted',
                'gen_ai.conversation.id': 'ses_bench',
                'subrun.depth': 0,
                'subrun.delegation.id': `dg_${i}`,
                'subrun.task_index': j,
                'subrun.goal': `no-op ${j}`,
                'subrun.remote': false,
              },
            },
            parent,
          ),
        );
      }
    }
    for (const span of children) span.addEvent('subrun.started');
    for (const span of children) {
      span.setAttributes({
        'subrun.status': 'completed',
        'subrun.exit_reason': 'completed',
        'subrun.api_calls': 0,
        'subrun.tool_count': 0,
        'gen_ai.usage.input_tokens': 0,
        'gen_ai.usage.output_tokens': 0,
      });
      span.end();
    }
    for (const d of delegations) d.end();
    per.push(((performance.now() - t0) * 1000) / n);
  }
  return median(per);
}

/** Metrics.scrape() with `n` live children (parked in `hang`), p50 over `times` scrapes, in ms. */
async function scrape(n: number, times: number): Promise<{ p50: number; p99: number; bytes: number }> {
  const metrics = new Metrics();
  const rt = createRuntime({ observer: metrics, max_concurrent_children: n });
  const runner = { kind: 'scripted', steps: [{ op: 'hang' }] };
  for (let left = n; left > 0; left -= 1000) rt.delegate(Array.from({ length: Math.min(1000, left) }, (_, i) => ({ goal: `hangs ${i}`, agent: runner })));
  await new Promise((resolve) => setImmediate(resolve));
  const first = await metrics.scrape();
  if (!first.includes(`subrun_children{state="running"} ${n}`)) throw new Error('the children are not all running');
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const t0 = performance.now();
    await metrics.scrape();
    ms.push(performance.now() - t0);
  }
  await rt.shutdown();
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), bytes: first.length };
}

export const otelCase: BenchCase = {
  name: 'otel',
  title: 'Telemetry cost: delegation and steer with no SDK and with an in-memory SDK vs the hooks bypassed; /metrics at 10,000 children',
  async run(opts: CaseOptions): Promise<Row[]> {
    const n = bySize(opts.mode, { full: 10_000, quick: 10_000, tiny: 200 });
    const steers = bySize(opts.mode, { full: 2000, quick: 1000, tiny: 50 });
    const rounds = bySize(opts.mode, { full: 7, quick: 5, tiny: 1 });
    const live = bySize(opts.mode, { full: 10_000, quick: 10_000, tiny: 200 });
    // Warm-up of both builds, unmeasured.
    for (const off of [true, false]) {
      bypass(off);
      await runSubrun(Math.min(n, 2000));
      await steerRun(Math.min(steers, 200));
    }
    const control = await ab(rounds, n, steers, true);
    const noSdk = await ab(rounds, n, steers);
    opts.log(
      `otel: no SDK: per child ${noSdk.with.perChild.map((x) => (x * 1000).toFixed(2)).join(' ')} µs vs ${noSdk.base.perChild.map((x) => (x * 1000).toFixed(2)).join(' ')}`,
    );

    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    // The exporter keeps every span it is given: emptied at each export so memory stays flat.
    const drain = setInterval(() => exporter.reset(), 200);
    bypass(false);
    await runSubrun(Math.min(n, 2000));
    const sdk = await ab(rounds, n, steers);
    const floor = spanFloorUs(n, rounds);
    clearInterval(drain);
    await provider.shutdown();
    opts.log(
      `otel: SDK: per child ${sdk.with.perChild.map((x) => (x * 1000).toFixed(2)).join(' ')} µs vs ${sdk.base.perChild.map((x) => (x * 1000).toFixed(2)).join(' ')}`,
    );

    const s = await scrape(live, bySize(opts.mode, { full: 50, quick: 20, tiny: 3 }));
    const note = `${n} children at concurrency 64; ${steers} steers; ${rounds} alternating rounds each`;
    return [
      ...rows('aa', 'the bypassed build again (A/A: the noise floor)', control, '', note),
      ...rows('no_sdk', 'no SDK registered', noSdk, '<= 1.05', note),
      ...rows('sdk', 'BatchSpanProcessor + InMemorySpanExporter', sdk, '<= 1.3', note),
      // The floor, measured in the same run: the bypassed child plus the SDK's own span work for it.
      // Above 1.3x, the goal above cannot hold with one span per child on this SDK.
      row({
        case: 'otel.sdk.delegation_floor',
        figure: median(sdk.base.perChild) * 1000 + floor,
        unit: 'µs/child, the bypassed child + the SDK making its spans directly',
        baseline: median(sdk.base.perChild) * 1000,
        baseline_unit: 'µs/child (telemetry hooks bypassed)',
        note: `the SDK's own work: ${floor.toFixed(2)} µs a child (an invoke_agent span with its attributes and event, a 64th of a delegation span)`,
      }),
      row({
        case: 'otel.sdk.delegation_over_floor',
        figure: median(sdk.with.perChild) * 1000,
        unit: 'µs/child with the SDK',
        baseline: median(sdk.base.perChild) * 1000 + floor,
        baseline_unit: 'µs/child (the floor above)',
        goal: '<= 1.1',
        note: "what subrun adds to the SDK's own span work per child",
      }),
      row({
        case: 'otel.metrics.scrape_p50',
        figure: s.p50,
        unit: `ms per scrape, ${live} live children`,
        goal: '<= 20',
        pass: s.p50 <= 20,
        note: `p99 ${s.p99.toFixed(2)} ms; ${s.bytes} bytes of text`,
      }),
    ];
  },
};
