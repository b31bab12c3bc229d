// Case 2, tail memory: 1,000 live children each stream 1 MiB, then (fresh children) 100 MiB, in
// deltas of 100 B to 8 KiB through the runner context's streaming call (`ctx.textDelta`: the
// transcript, the `subagent.text` event, the interrupted-summary bookkeeping). Retained memory per
// child (V8 heap + external/ArrayBuffer memory after a full GC, over the same measure before the
// children existed, divided by their count) must stay at or under 20 KiB in both runs, and the two
// runs within 5% of each other: what a child keeps must not depend on how much it wrote.
//
// Subrun's share is told apart from the runner's: the runner's own parked state (its controller,
// abort listener and pending promise) is measured alone in the same process and subtracted; the
// all-in figures are reported beside it.
//
// Append cost per byte: appendBytes against a raw copy of the same bytes into a fixed 16 KiB ring
// (`Uint8Array.set` with wrap); Transcript.append (text, the path children use) against a raw
// UTF-8 encode of the same text into a fixed ring (`Buffer#write`, with TextEncoder#encodeInto
// beside it), since text must be encoded to be kept as bytes, and against the copy for reference.
import { Transcript, TAIL_WINDOW_BYTES } from '../../src/child/transcript.ts';
import type { Owner, RunOutcome, Runner, RunnerContext } from '../../src/types.ts';
import { createRuntime } from '../../src/delegation/runtime.ts';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { measureMemory } from '../lib/memory.ts';
import { micro, until, type MicroOptions } from '../lib/micro.ts';
import { row, type Row } from '../lib/stats.ts';

const OWNER: Owner = { session_id: 'ses_bench', transport: 'tr_bench', generation: 1 };
const KiB = 1024;
const MiB = 1024 * KiB;

/** Deterministic chunk sizes in [100, 8192] (xorshift), and text of those sizes (some non-ASCII). */
export function chunks(count: number, seed = 42): { texts: string[]; bytes: Uint8Array[] } {
  let x = seed;
  const rand = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
  // Mostly ASCII, as model output mostly is; every fourth chunk has non-ASCII text in it.
  const ascii = 'The parser now handles nested generics; see the summary of changes below. ';
  const other = 'The parser now handles nested generics — résumé of the changes below. ';
  const bases = [ascii, other].map((l) => l.repeat(Math.ceil(8192 / l.length) + 1));
  const enc = new TextEncoder();
  const texts: string[] = [];
  for (let i = 0; i < count; i++) {
    const size = 100 + Math.floor(rand() * (8192 - 100 + 1));
    // Cut by UTF-8 size: the line has two 2-byte characters, so trim until it fits.
    let t = (bases[i % 4 === 3 ? 1 : 0] as string).slice(0, size);
    while (Buffer.byteLength(t) > size) t = t.slice(0, -1);
    // A fresh flat string, not a slice of `base`, so retained-memory figures are honest.
    texts.push(Buffer.from(t).toString());
  }
  return { texts, bytes: texts.map((t) => enc.encode(t)) };
}

interface WriteRun {
  /** All a live child retains after writing (bytes). */
  readonly perChild: number;
  /** What a live child retains before it writes anything. */
  readonly quiet: number;
  readonly written: number;
  readonly ms: number;
  readonly complete: boolean;
}

/** The runner's own state for one child, as the runner below keeps it: its pending promise and its abort listener. */
function parkUntilAborted(signal: AbortSignal): Promise<RunOutcome> {
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve({ status: 'interrupted' }), { once: true }));
}

/**
 * What `n` of the runner's own parked states retain without subrun (an AbortController, its
 * listener and the pending promise per child): user code's share of a child, measured in the same
 * process so subrun's share can be told apart from it.
 */
async function runnerAlone(n: number): Promise<number> {
  const before = await measureMemory();
  const controllers = Array.from({ length: n }, () => new AbortController());
  const parked = controllers.map((c) => parkUntilAborted(c.signal));
  const after = await measureMemory();
  for (const c of controllers) c.abort('done');
  await Promise.all(parked);
  return (after - before) / n;
}

/** `n` live children; each streams `perChild` bytes round-robin; returns retained bytes per child. */
async function writeRun(n: number, perChild: number, texts: string[], budgetMs: number, log: (m: string) => void): Promise<WriteRun> {
  const ctxs: RunnerContext[] = [];
  const runner: Runner = {
    model: 'bench-stream',
    run: (ctx) => {
      ctxs.push(ctx);
      return parkUntilAborted(ctx.signal);
    },
  };
  const runtime = createRuntime({ max_concurrent_children: n, retain_finished: 0 });
  const before = await measureMemory();
  const handle = runtime.delegate(
    Array.from({ length: n }, (_, i) => ({ goal: `stream ${i}`, runner })),
    { owner: OWNER },
  );
  handle.results.catch(() => undefined);
  await until(() => ctxs.length === n, 60_000, 'children to start');
  const quiet = await measureMemory();
  const sizes = texts.map((t) => Buffer.byteLength(t));
  const t0 = performance.now();
  let k = 0;
  let written = 0;
  let complete = true;
  // Round-robin: every child writes one delta per round, as concurrent streams would.
  while (written < perChild) {
    const text = texts[k % texts.length] as string;
    const size = sizes[k % texts.length] as number;
    k++;
    for (const ctx of ctxs) ctx.textDelta(text);
    written += size;
    if ((k & 255) === 0 && performance.now() - t0 > budgetMs) {
      complete = false;
      break;
    }
  }
  const ms = performance.now() - t0;
  const after = await measureMemory();
  // Sanity: the tail is the window, whatever was written.
  const tail = runtime.tail(ctxs[0]?.subagent_id as string);
  if (tail.offset < Math.min(written, perChild) || Buffer.byteLength(tail.text) > TAIL_WINDOW_BYTES) throw new Error('tail is not the window');
  const perChildRetained = (after - before) / n;
  const perChildQuiet = (quiet - before) / n;
  log(
    `tail-memory: ${n} children x ${(written / MiB).toFixed(1)} MiB in ${(ms / 1000).toFixed(1)} s (${((n * written) / MiB / (ms / 1000)).toFixed(0)} MiB/s): ` +
      `${(perChildRetained / KiB).toFixed(2)} KiB/child (${(perChildQuiet / KiB).toFixed(2)} before writing)`,
  );
  await runtime.shutdown();
  return { perChild: perChildRetained, quiet: perChildQuiet, written, ms, complete };
}

export const tailMemoryCase: BenchCase = {
  name: 'tail-memory',
  title: 'Tail memory: retained bytes per streaming child after 1 MiB and 100 MiB; append cost per byte',
  async run(opts: CaseOptions): Promise<Row[]> {
    const n = bySize(opts.mode, { full: 1000, quick: 1000, tiny: 20 });
    const small = bySize(opts.mode, { full: 1 * MiB, quick: 1 * MiB, tiny: 64 * KiB });
    const large = bySize(opts.mode, { full: 100 * MiB, quick: 10 * MiB, tiny: 256 * KiB });
    const budgetMs = bySize(opts.mode, { full: 150_000, quick: 30_000, tiny: 5_000 });
    const { texts, bytes } = chunks(512);

    const a = await writeRun(n, small, texts, budgetMs, opts.log);
    const b = await writeRun(n, large, texts, budgetMs, opts.log);
    const runnerOwn = await runnerAlone(n);
    opts.log(`tail-memory: the runner's own state (controller, listener, pending promise) ${(runnerOwn / KiB).toFixed(2)} KiB per child`);

    // Append cost per byte.
    const mo: MicroOptions = bySize<MicroOptions>(opts.mode, {
      full: { timeMs: 250, warmupMs: 100, rounds: 5 },
      quick: { timeMs: 80, warmupMs: 40, rounds: 3 },
      tiny: { timeMs: 5, warmupMs: 2, rounds: 1 },
    });
    const totalBytes = bytes.reduce((s, c) => s + c.length, 0);
    const t = new Transcript();
    const tb = new Transcript();
    const ring = new Uint8Array(TAIL_WINDOW_BYTES);
    let at = 0;
    const rawCopy = (c: Uint8Array) => {
      const first = Math.min(c.length, ring.length - at);
      ring.set(first === c.length ? c : c.subarray(0, first), at);
      if (first < c.length) ring.set(c.subarray(first), 0);
      at = (at + c.length) % ring.length;
    };
    // A raw UTF-8 encode into a ring (Buffer#write; TextEncoder#encodeInto is measured beside it):
    // straight into the ring when it surely fits before the wrap, else via a scratch. Text has to
    // be encoded to be stored as bytes, so this, not the copy, is text's floor.
    const eRing = Buffer.allocUnsafeSlow(TAIL_WINDOW_BYTES);
    const scratch = Buffer.allocUnsafeSlow(3 * 8192);
    let eat = 0;
    const rawEncode = (s: string) => {
      if (eRing.length - eat >= s.length * 3) {
        eat = (eat + eRing.write(s, eat)) % eRing.length;
        return;
      }
      const w = scratch.write(s, 0);
      const first = Math.min(w, eRing.length - eat);
      eRing.set(scratch.subarray(0, first), eat);
      if (first < w) eRing.set(scratch.subarray(first, w), 0);
      eat = (eat + w) % eRing.length;
    };
    const enc = new TextEncoder();
    let iat = 0;
    const encodeIntoRing = (s: string) => {
      if (eRing.length - iat >= s.length * 3) {
        iat = (iat + enc.encodeInto(s, eRing.subarray(iat)).written) % eRing.length;
        return;
      }
      const w = enc.encodeInto(s, scratch).written;
      const first = Math.min(w, eRing.length - iat);
      eRing.set(scratch.subarray(0, first), iat);
      if (first < w) eRing.set(scratch.subarray(first, w), 0);
      iat = (iat + w) % eRing.length;
    };
    const r = await micro(
      [
        {
          name: 'append',
          ops: totalBytes,
          fn: () => {
            for (const s of texts) t.append(s);
          },
        },
        {
          name: 'appendBytes',
          ops: totalBytes,
          fn: () => {
            for (const c of bytes) tb.appendBytes(c);
          },
        },
        {
          name: 'raw',
          ops: totalBytes,
          fn: () => {
            for (const c of bytes) rawCopy(c);
          },
        },
        {
          name: 'rawEncode',
          ops: totalBytes,
          fn: () => {
            for (const s of texts) rawEncode(s);
          },
        },
        // The encoder the transcript used before: TextEncoder#encodeInto into the same ring.
        {
          name: 'encodeInto',
          ops: totalBytes,
          fn: () => {
            for (const s of texts) encodeIntoRing(s);
          },
        },
      ],
      mo,
    );
    const ns = (k: string) => r.get(k)?.ns as number;
    opts.log(
      `tail-memory: append ${ns('append').toFixed(3)} ns/B, appendBytes ${ns('appendBytes').toFixed(3)}, raw copy ${ns('raw').toFixed(3)}, raw encode ${ns('rawEncode').toFixed(3)}`,
    );

    const limit = 20 * KiB;
    const mib = (x: number) => (x >= MiB ? `${Math.round(x / MiB)} MiB` : `${Math.round(x / KiB)} KiB`);
    const note = (w: WriteRun) =>
      `${n} children, ${(w.written / MiB).toFixed(1)} MiB each in ${(w.ms / 1000).toFixed(1)} s${w.complete ? '' : ' (stopped by the time bound)'}`;
    const share = (w: WriteRun) => w.perChild - runnerOwn;
    const within = Math.abs(share(b) - share(a)) / Math.max(share(a), 1) <= 0.05;
    return [
      // What subrun retains per live child (machinery and tail window): all a child retains, less
      // what its runner keeps of its own (measured alone, same process).
      row({
        case: `tail.retained@${mib(a.written)}`,
        figure: share(a) / KiB,
        unit: 'KiB/child',
        baseline: limit / KiB,
        baseline_unit: 'KiB (goal)',
        goal: '<= 1',
        note: note(a),
      }),
      row({
        case: `tail.retained@${mib(b.written)}`,
        figure: share(b) / KiB,
        unit: 'KiB/child',
        baseline: share(a) / KiB,
        baseline_unit: `KiB/child @${mib(a.written)}`,
        goal: '<= 20 KiB, within 5%',
        pass: share(b) <= limit && within,
        note: note(b),
      }),
      // All-in: subrun's share plus the runner's own state.
      row({
        case: `tail.all_in@${mib(a.written)}`,
        figure: a.perChild / KiB,
        unit: 'KiB/child',
        note: `subrun + the runner's own ${(runnerOwn / KiB).toFixed(2)} KiB`,
      }),
      row({
        case: `tail.all_in@${mib(b.written)}`,
        figure: b.perChild / KiB,
        unit: 'KiB/child',
        note: `subrun + the runner's own ${(runnerOwn / KiB).toFixed(2)} KiB`,
      }),
      row({
        case: 'tail.runner_own',
        figure: runnerOwn / KiB,
        unit: 'KiB/child',
        note: 'the runner alone: an AbortController, its abort listener and a pending promise',
      }),
      // What writing added: the same children measured before their first byte and after.
      row({
        case: `tail.added_by_writing@${mib(a.written)}`,
        figure: (a.perChild - a.quiet) / KiB,
        unit: 'KiB/child',
        baseline: limit / KiB,
        baseline_unit: 'KiB (goal)',
        goal: '<= 1',
      }),
      row({
        case: `tail.added_by_writing@${mib(b.written)}`,
        figure: (b.perChild - b.quiet) / KiB,
        unit: 'KiB/child',
        baseline: limit / KiB,
        baseline_unit: 'KiB (goal)',
        goal: '<= 1',
      }),
      row({
        case: 'tail.quiet_child',
        figure: a.quiet / KiB,
        unit: 'KiB/child',
        note: 'a live child that has written nothing (records, inbox, context, promises, abort signals)',
      }),
      row({
        case: 'tail.append_bytes',
        figure: ns('appendBytes'),
        unit: 'ns/B',
        baseline: ns('raw'),
        baseline_unit: 'ns/B (raw copy into a ring)',
        goal: '<= 2',
      }),
      row({
        case: 'tail.append_text',
        figure: ns('append'),
        unit: 'ns/B',
        baseline: ns('rawEncode'),
        baseline_unit: 'ns/B (raw UTF-8 encode into a ring)',
        goal: '<= 2',
      }),
      row({
        case: 'tail.encode.buffer_write',
        figure: ns('rawEncode'),
        unit: 'ns/B',
        baseline: ns('encodeInto'),
        baseline_unit: 'ns/B (TextEncoder#encodeInto into the same ring)',
        note: 'the two encoders the transcript could use, on the same text',
      }),
      row({
        case: 'tail.append_text.vs_copy',
        figure: ns('append'),
        unit: 'ns/B',
        baseline: ns('raw'),
        baseline_unit: 'ns/B (raw copy into a ring)',
        note: `the encode alone is ${(ns('rawEncode') / ns('raw')).toFixed(1)}x the copy`,
      }),
    ];
  },
};
