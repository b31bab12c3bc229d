// The Prometheus side: one prom-client Registry per server (never the global one, so two servers
// in a process, or an embedder's own metrics, never collide), fed by the runtime as a
// RuntimeObserver and by the server's gauges read at scrape time. No label carries an id, a goal,
// a model name or content: every label takes one of a fixed few values (else `other`), except
// `worker`, a live worker's id, whose series go when the worker does.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { VERSION } from '../version.ts';
import { SteerWaits } from './steer-waits.ts';
import type { CompletionEntry, SteerRejection } from '../types.ts';
import { NO_RUN, NO_TURN, type ChatEnd, type ChildFacts, type Ending, type RunTelemetry, type RuntimeObserver, type TurnTelemetry } from './observer.ts';
import { withProps } from '../shapes.ts';

const STATUSES = ['completed', 'interrupted', 'failed', 'error', 'timeout'] as const;
const EXIT_REASONS = new Set<string>([...STATUSES, 'max_iterations', 'spawn_refused', 'worker_lost', 'child_lost']);
const STEER_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];
const MODEL_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

const STEER_FATES = ['queued', 'delivered', 'missed', 'rejected'] as const;
type SteerFate = (typeof STEER_FATES)[number];

const known = (set: ReadonlySet<string>, value: string): string => (set.has(value) ? value : 'other');
const STATUS_SET: ReadonlySet<string> = new Set(STATUSES);

/** Gauges the server reads at scrape time (each a cheap count it keeps anyway). */
export interface GaugeSources {
  sessions?(): { live: number; parked: number };
  connections?(): { ws: number; stdio: number };
  sseSubscribers?(): number;
  replayRingBytes?(): number;
}

export interface WorkerGauge {
  readonly worker: string;
  readonly capacity: number;
  readonly children: number;
}

export class Metrics implements RuntimeObserver {
  /** The server's own registry: serve it, or `Registry.merge` it with yours. */
  readonly registry = new Registry();
  readonly #sources: GaugeSources[] = [];
  #workers: (() => readonly WorkerGauge[]) | undefined;
  /** Live children and where they are: the gauge is counted from this, so it cannot drift. */
  readonly #children = new Map<string, 'queued' | 'running'>();
  /** Steers queued and not settled yet, with when they were queued (ms). */
  readonly #steers = new SteerWaits();
  readonly #spawned: Counter;
  readonly #finished: Counter<'status' | 'exit_reason'>;
  /** Steers by fate, counted as plain numbers on the steer path and read into the counter at scrape time. */
  readonly #fates: Record<SteerFate, number> = { queued: 0, delivered: 0, missed: 0, rejected: 0 };
  readonly #steerDelivery: Histogram;
  readonly #interrupts: Counter<'found'>;
  readonly #modelRequests: Counter<'outcome'>;
  readonly #modelTokens: Counter<'type'>;
  readonly #modelDuration: Histogram;
  readonly #workersLost: Counter;
  readonly #now: () => number;

  constructor(options: { readonly now?: () => number; readonly defaults?: boolean } = {}) {
    this.#now = options.now ?? Date.now;
    const registers = [this.registry];
    const children = this.#children;
    new Gauge({
      name: 'subrun_children',
      help: 'Live children, every session and depth, by state.',
      labelNames: ['state'],
      registers,
      collect() {
        let queued = 0;
        for (const s of children.values()) if (s === 'queued') queued++;
        this.set({ state: 'queued' }, queued);
        this.set({ state: 'running' }, children.size - queued);
      },
    });
    this.#spawned = new Counter({ name: 'subrun_children_spawned_total', help: 'Children created, every depth.', registers });
    this.#finished = new Counter({
      name: 'subrun_children_finished_total',
      help: 'Completion entries sealed, by status and exit reason.',
      labelNames: ['status', 'exit_reason'],
      registers,
    });
    const fates = this.#fates;
    new Counter({
      name: 'subrun_steers_total',
      help: 'Steers by fate: queued when accepted, then delivered or missed once; rejected: not queued.',
      labelNames: ['fate'],
      registers,
      collect() {
        // A labelled inc hashes its labels on every call (prom-client): too dear once per steer.
        this.reset();
        for (const fate of STEER_FATES) this.inc({ fate }, fates[fate]);
      },
    });
    this.#steerDelivery = new Histogram({
      name: 'subrun_steer_delivery_seconds',
      help: 'From a steer queued to its delivery.',
      buckets: STEER_BUCKETS,
      registers,
    });
    const steers = this.#steers;
    new Gauge({
      name: 'subrun_steer_queue_depth',
      help: 'Steers queued, not yet delivered or missed.',
      registers,
      collect() {
        this.set(steers.size);
      },
    });
    this.#interrupts = new Counter({
      name: 'subrun_interrupts_total',
      help: 'Interrupt calls, by whether they found a live target.',
      labelNames: ['found'],
      registers,
    });
    this.#modelRequests = new Counter({
      name: 'subrun_model_requests_total',
      help: 'Requests to the model server, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.#modelTokens = new Counter({ name: 'subrun_model_tokens_total', help: 'Tokens the model server reported, by type.', labelNames: ['type'], registers });
    this.#modelDuration = new Histogram({
      name: 'subrun_model_request_duration_seconds',
      help: 'One model request, from sending to the end of its stream.',
      buckets: MODEL_BUCKETS,
      registers,
    });
    this.#workersLost = new Counter({ name: 'subrun_workers_lost_total', help: 'Workers declared lost.', registers });
    this.#serverGauges(registers);
    new Gauge({ name: 'subrun_build_info', help: 'The running version (always 1).', labelNames: ['version'], registers }).set({ version: VERSION }, 1);
    // process_* and nodejs_*, with nodejs_eventloop_lag_seconds, into this registry only.
    if (options.defaults !== false) collectDefaultMetrics({ register: this.registry });
  }

  #serverGauges(registers: Registry[]): void {
    const sources = this.#sources;
    const sum = <K extends string>(read: (s: GaugeSources) => Record<K, number> | number | undefined, key?: K): number => {
      let n = 0;
      for (const s of sources) {
        const v = read(s);
        n += typeof v === 'number' ? v : v !== undefined && key !== undefined ? v[key] : 0;
      }
      return n;
    };
    new Gauge({
      name: 'subrun_sessions',
      help: 'Sessions: live while a socket or event stream is attached, else parked.',
      labelNames: ['state'],
      registers,
      collect() {
        this.set(
          { state: 'live' },
          sum((s) => s.sessions?.(), 'live'),
        );
        this.set(
          { state: 'parked' },
          sum((s) => s.sessions?.(), 'parked'),
        );
      },
    });
    new Gauge({
      name: 'subrun_connections',
      help: 'Open JSON-RPC connections, by transport.',
      labelNames: ['transport'],
      registers,
      collect() {
        this.set(
          { transport: 'ws' },
          sum((s) => s.connections?.(), 'ws'),
        );
        this.set(
          { transport: 'stdio' },
          sum((s) => s.connections?.(), 'stdio'),
        );
      },
    });
    new Gauge({
      name: 'subrun_sse_subscribers',
      help: 'Open event streams.',
      registers,
      collect() {
        this.set(sum((s) => s.sseSubscribers?.()));
      },
    });
    new Gauge({
      name: 'subrun_replay_ring_bytes',
      help: "Bytes in open sessions' replay rings.",
      registers,
      collect() {
        this.set(sum((s) => s.replayRingBytes?.()));
      },
    });
    const workers = () => this.#workers?.() ?? [];
    // Reset at each scrape: a lost worker's series go with it.
    new Gauge({
      name: 'subrun_worker_capacity',
      help: "A live worker's --max-children.",
      labelNames: ['worker'],
      registers,
      collect() {
        this.reset();
        for (const w of workers()) this.set({ worker: w.worker }, w.capacity);
      },
    });
    new Gauge({
      name: 'subrun_worker_children',
      help: 'Children running on a live worker.',
      labelNames: ['worker'],
      registers,
      collect() {
        this.reset();
        for (const w of workers()) this.set({ worker: w.worker }, w.children);
      },
    });
  }

  /** Adds gauges read at scrape time (a server's sessions, connections, streams, rings). */
  addSources(sources: GaugeSources): void {
    this.#sources.push(sources);
  }

  /** The fleet, read at scrape time (a control plane's worker table). */
  setWorkers(read: () => readonly WorkerGauge[]): void {
    this.#workers = read;
  }

  workerLost(): void {
    this.#workersLost.inc();
  }

  /** The text exposition (`text/plain; version=0.0.4`). */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  delegated(): void {}
  delegationDone(): void {}

  created(c: ChildFacts): void {
    if (this.#children.has(c.subagent_id)) return;
    this.#children.set(c.subagent_id, 'queued');
    this.#spawned.inc();
  }

  started(c: ChildFacts): void {
    if (this.#children.has(c.subagent_id)) this.#children.set(c.subagent_id, 'running');
  }

  finished(c: ChildFacts, entry: CompletionEntry): void {
    // Before the spawn check: a child adopted after a restart was not counted spawned here, but
    // the steers queued to it here were, and they leave the queue (missed or not) at its end.
    this.#fates.missed += this.#steers.ended(c.subagent_id, entry.missed_steer_detail ?? []).length;
    if (!this.#children.delete(c.subagent_id)) return;
    this.#finished.inc({ status: known(STATUS_SET, entry.status), exit_reason: known(EXIT_REASONS, entry.exit_reason) });
  }

  steerQueued(child: string, steer_id: string, _bytes: number, at: number): void {
    this.#steers.queued(child, steer_id, at);
    this.#fates.queued++;
  }

  steerDelivered(child: string, steer_id: string, at: number): void {
    const queued = this.#steers.settle(child, steer_id);
    if (queued === undefined) return;
    this.#fates.delivered++;
    this.#steerDelivery.observe(Math.max(0, at - queued) / 1000);
  }

  steerWithdrawn(child: string, steer_id: string): void {
    // Told as rejected in the end (the host heard no `queued`): it leaves the queued count as it came.
    if (this.#steers.settle(child, steer_id, true) !== undefined) this.#fates.rejected++;
  }

  steerRejected(_child: string, reason: SteerRejection): void {
    // Only a steer that passed validation counts: an empty or too long text is the caller's error.
    if (reason !== 'empty' && reason !== 'too_long') this.#fates.rejected++;
  }

  interrupted(_target: string, found: boolean): void {
    this.#interrupts.inc({ found: found ? 'true' : 'false' });
  }

  run(): RunTelemetry {
    return withProps(NO_RUN, { chat: () => this.#chat() });
  }

  /** A parent agent's model requests count like a child's: the loop runs in this process. */
  turn(): TurnTelemetry {
    return withProps(NO_TURN, { chat: () => this.#chat() });
  }

  #chat(): Ending<ChatEnd> {
    const started = this.#now();
    return {
      end: (r) => {
        this.#modelRequests.inc({ outcome: r.outcome });
        this.#modelDuration.observe(Math.max(0, this.#now() - started) / 1000);
        if (r.outcome !== 'ok') return;
        this.#modelTokens.inc({ type: 'input' }, r.input_tokens);
        this.#modelTokens.inc({ type: 'output' }, r.output_tokens);
      },
    };
  }
}
