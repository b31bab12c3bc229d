// Case 5, event fan-out: the bus's publish cost with K glob subscribers of which about 1% match,
// against (a) the naive design, every subscriber's glob compiled to a RegExp and tested in a loop
// (at K = 10k the bus must be at least 10x faster), and (b) node:events at K = 10 (no slower).
//
// Topics are three segments (`agent.<id>.<kind>`). The non-matching 99% subscribe to other
// children (`agent.a17.*`, `agent.a17.text`, `agent.a17.**`); the matching 1% use every glob form
// (`agent.*.text`, `**.text`, `agent.a0.*`, `agent.**`). At K = 10 one subscriber matches.
// The node:events baseline registers the same listeners under exact event names (the matching
// one under the published topic: what a user of node:events would have to do) and emits the same
// envelope `{type, ts, src, ...payload}`, built the plain way.
import { EventEmitter } from 'node:events';
import { EventBus, type EventEnvelope } from '../../src/registry/events.ts';
import { bySize, type BenchCase, type CaseOptions } from '../lib/case.ts';
import { micro, type MicroOptions, type MicroTask } from '../lib/micro.ts';
import { row, type Row } from '../lib/stats.ts';

const TOPIC = 'agent.a0.text';
const PAYLOAD = {
  subagent_id: 'sa_0000000000a0',
  parent_id: null,
  depth: 0,
  delegation_id: 'dg_00000000000x',
  task_index: 0,
  task_count: 1,
  goal: 'refactor the parser',
  text: 'reading src/parser.ts',
  src: 'sa_0000000000a0',
};
const MATCHING = ['agent.*.text', '**.text', 'agent.a0.*', 'agent.**'];
const OTHER = (i: number) => [`agent.a${i}.*`, `agent.a${i}.text`, `agent.a${i}.**`][i % 3] as string;

/** K globs, ceil(K/100) of them matching TOPIC, spread evenly through the list. */
export function globs(k: number): { globs: string[]; matching: number } {
  const matching = Math.max(1, Math.round(k / 100));
  const every = Math.floor(k / matching);
  const out: string[] = [];
  let m = 0;
  for (let i = 0; i < k; i++) {
    if (m < matching && i % every === every - 1) out.push(MATCHING[m++ % MATCHING.length] as string);
    else out.push(OTHER(i + 1));
  }
  return { globs: out, matching: m };
}

/** The naive matcher: a glob as one anchored RegExp (`*` one segment, `**` zero or more). */
export function globToRegExp(glob: string): RegExp {
  const parts = glob.split('.');
  if (parts.length === 1 && parts[0] === '**') return /^.*$/;
  let src = '';
  let needSep = false;
  for (const p of parts) {
    if (p === '**') {
      // Zero or more whole segments, each carrying its own separator.
      src += needSep ? '(?:\\.[^.]+)*' : '(?:[^.]+\\.)*';
      continue;
    }
    if (needSep) src += '\\.';
    src += p === '*' ? '[^.]+' : p.replace(/[\\^$+?()[\]{}|.]/g, '\\$&');
    needSep = true;
  }
  return new RegExp(`^${src}$`);
}

export const fanoutCase: BenchCase = {
  name: 'fanout',
  title: 'Event fan-out: publish with K glob subscribers (~1% match) vs a RegExp loop and node:events',
  async run(opts: CaseOptions): Promise<Row[]> {
    const ks = [10, 1000, 10_000];
    // Nine rounds in full mode: at K = 10 both sides (the same envelope build) flip between two
    // speeds from one round to the next on this VM; more rounds keep a median from landing in one
    // side's slow spell alone.
    const mo: MicroOptions = bySize<MicroOptions>(opts.mode, {
      full: { timeMs: 250, warmupMs: 100, rounds: 9 },
      quick: { timeMs: 80, warmupMs: 40, rounds: 3 },
      tiny: { timeMs: 5, warmupMs: 2, rounds: 1 },
    });
    const OPS = 100;
    let hits = 0;
    const sub = (e: EventEnvelope) => {
      hits += e.type.length > 0 ? 1 : 0;
    };
    const tasks: MicroTask[] = [];
    const expected = new Map<string, number>();
    for (const k of ks) {
      const { globs: gs, matching } = globs(k);
      const bus = new EventBus();
      for (const g of gs) bus.subscribe(g, sub);
      const res = gs.map((g) => globToRegExp(g));
      // Sanity: both matchers agree on which subscribers match.
      const regexMatches = res.filter((re) => re.test(TOPIC)).length;
      hits = 0;
      bus.publish(TOPIC, PAYLOAD);
      if (hits !== matching || regexMatches !== matching) {
        throw new Error(`K=${k}: bus matched ${hits}, RegExp matched ${regexMatches}, expected ${matching}`);
      }
      expected.set(`bus@${k}`, matching);
      tasks.push({
        name: `bus@${k}`,
        ops: OPS,
        fn: () => {
          for (let i = 0; i < OPS; i++) bus.publish(TOPIC, PAYLOAD);
        },
      });
      // Fewer publishes per call where each is slow, so every call stays well under a millisecond.
      const regexOps = Math.max(1, Math.min(OPS, Math.floor(2000 / k)));
      tasks.push({
        name: `regex@${k}`,
        ops: regexOps,
        fn: () => {
          for (let i = 0; i < regexOps; i++) {
            const event = { type: TOPIC, ts: Date.now() / 1000, ...PAYLOAD };
            for (let j = 0; j < res.length; j++) if ((res[j] as RegExp).test(TOPIC)) sub(event);
          }
        },
      });
      if (k === 10) {
        const emitter = new EventEmitter();
        emitter.setMaxListeners(0);
        gs.forEach((g, i) => emitter.on(MATCHING.includes(g) ? TOPIC : `agent.a${i + 1}.text`, sub));
        tasks.push({
          name: `events@${k}`,
          ops: OPS,
          fn: () => {
            for (let i = 0; i < OPS; i++) emitter.emit(TOPIC, { type: TOPIC, ts: Date.now() / 1000, ...PAYLOAD });
          },
        });
      }
    }
    const r = await micro(tasks, mo);
    for (const [name, m] of r) opts.log(`fanout: ${name} ${m.ns.toFixed(0)} ns/publish (rounds ${m.rounds.map((x) => x.toFixed(0)).join(' ')})`);
    const ns = (name: string) => r.get(name)?.ns as number;
    return [
      row({ case: 'fanout.publish@10', figure: ns('bus@10'), unit: 'ns/publish', baseline: ns('events@10'), baseline_unit: 'ns (node:events)', goal: '<= 1' }),
      row({ case: 'fanout.publish@1k', figure: ns('bus@1000'), unit: 'ns/publish', baseline: ns('regex@1000'), baseline_unit: 'ns (RegExp loop)' }),
      row({
        case: 'fanout.publish@10k',
        figure: ns('bus@10000'),
        unit: 'ns/publish',
        baseline: ns('regex@10000'),
        baseline_unit: 'ns (RegExp loop)',
        goal: '<= 0.1',
      }),
      row({ case: 'fanout.publish@10k.vs@10', figure: ns('bus@10000'), unit: 'ns/publish', baseline: ns('bus@10'), baseline_unit: 'ns/publish @10' }),
    ];
  },
};
