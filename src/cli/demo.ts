// `subrun demo` (`npm start`): a parent delegates three scripted children at once, one of which
// spawns a grandchild. While they run, a live roster shows each child's status, last tool and
// tool count; the demo steers one child that takes the steer, steers one that finishes before it
// can (its entry comes back with missed_steer), interrupts one subtree, and prints every entry.
// No network, no keys; the scripted runner is deterministic, so the outcome is the same each run.
import { helpText, parseFlags, UsageError, wantsHelp, type FlagSpec } from './flags.ts';
import { openaiRunner, type OpenAIRunnerConfig } from '../agent/runner.ts';
import type { CompletionEntry } from '../types.ts';
import { isCompletionEntry, STORY_STEERS, storyTasks } from './demo-story.ts';
import { createRuntime } from '../index.ts';
import { MODEL_FLAGS, modelConfig } from './model-options.ts';
import type { Snapshot } from '../child/snapshot.ts';

export interface DemoOptions {
  /** Shorter pauses (for tests); the story is the same. */
  readonly fast?: boolean;
  readonly out?: NodeJS.WritableStream & { isTTY?: boolean };
}

export const DEMO_FLAGS = [
  { flag: 'fast', kind: 'bool', help: 'shorter pauses; the same story' },
  { flag: 'ui', env: 'SUBRUN_DEMO_UI', kind: 'bool', help: "the story on a server of its own; prints the dashboard's link" },
  ...MODEL_FLAGS,
] as const satisfies readonly FlagSpec[];

const DEMO_USAGE = `usage: subrun demo [--fast] [--ui] [--base-url URL --model M [--api-key K]]

A parent delegates three children (one spawns a grandchild); the demo steers one that takes the
steer, steers one that finishes before it can (missed_steer), interrupts a subtree and prints every
completion entry. On the built-in scripted runner unless given a model. With --ui, the same story
runs on a server (127.0.0.1, any free port) with the dashboard's link printed; it serves until Ctrl-C.`;

/**
 * `subrun demo [--fast] [--ui] [--base-url URL --model M ...]`: scripted by default, on a model if
 * given one; `--ui` plays the scripted story on a server with the dashboard to watch.
 */
export async function demoCommand(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(DEMO_USAGE, DEMO_FLAGS));
    return 0;
  }
  const { values, positionals, sources } = parseFlags(argv, DEMO_FLAGS);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const config = modelConfig(values, sources);
  if (values.ui === true) {
    if (config) throw new UsageError('--ui runs the scripted story; it takes no model options');
    return (await import('./demo-ui.ts')).runUiDemo({ fast: values.fast === true });
  }
  return config ? runModelDemo(config) : runDemo({ fast: values.fast === true });
}

/**
 * The same story on a real model: three children explore the workspace; the demo steers the
 * first after its first tool call and interrupts the third after its first tool call.
 */
export async function runModelDemo(config: OpenAIRunnerConfig, out: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout): Promise<number> {
  const runtime = createRuntime({ max_concurrent_children: 3, max_spawn_depth: 1 });
  const runner = openaiRunner(config);
  const story = new Story(out, () => runtime.list({ include_finished: true }));
  const say = (line: string) => story.say(line);
  const handle = runtime.delegate([
    { goal: 'List the top-level files of the workspace and say in two sentences what this project is.', runner },
    { goal: 'Read README.md and list its quick-start commands, one per line.', runner },
    { goal: 'Search the workspace for the word TODO and report where it appears.', runner },
  ]);
  const [first, , third] = threeIds(handle.subagent_ids);
  say(`delegated ${handle.subagent_ids.length} children on ${config.endpoint.model} (${handle.delegation_id})`);
  let steered = false;
  let stopped = false;
  const stop = runtime.events.subscribe('subagent.**', (e) => {
    const id = String(e.subagent_id);
    if (e.type === 'subagent.tool' && id === first && !steered) {
      steered = true;
      const r = runtime.steer(first, 'Also say how many files there are in total.');
      say(`steer ${first}: ${r.status}`);
    }
    if (e.type === 'subagent.tool' && id === third && !stopped) {
      stopped = true;
      const r = runtime.interrupt(third);
      say(`interrupt ${third}: stopped [${r.interrupted.join(', ')}]`);
    }
    if (e.type === 'subagent.steer.delivered') say(`delivered to ${id}: ${JSON.stringify(e.text)}`);
    if (e.type === 'subagent.complete' && isCompletionEntry(e.entry)) {
      const entry = e.entry;
      say(`${id} finished: ${entry.status}${entry.missed_steer ? `; ${MISSED_BEFORE_DELIVERY}` : ''}`);
    }
  });
  story.live(250);
  const results = await handle.results;
  stop();
  story.end();
  out.write('\nCompletion entries:\n');
  for (const entry of results) out.write(`${JSON.stringify(entry, null, 2)}\n`);
  // A model that could not be reached (or failed every child) is a failed demo, not a story.
  const failed = results.filter((e) => e.status === 'failed' || e.status === 'error' || e.status === 'timeout');
  if (failed.length > 0) {
    process.stderr.write(
      `subrun: demo failed: ${failed.length} of ${results.length} children ended ${failed[0]?.status}: ${failed[0]?.error ?? 'no reason given'}\n`,
    );
    return 1;
  }
  return 0;
}

/** The ids of a delegation of three tasks, in task order (one child per task). */
function threeIds(ids: readonly string[]): [string, string, string] {
  const [a, b, c] = ids;
  if (a === undefined || b === undefined || c === undefined) throw new Error(`the demo delegates three tasks, got ${ids.length} ids`);
  return [a, b, c];
}

const MISSED_BEFORE_DELIVERY = 'its steer missed: the child finished before its next delivery point, so the text is back in missed_steer';

export async function runDemo(options: DemoOptions = {}): Promise<number> {
  const out = options.out ?? process.stdout;
  const ms = (n: number) => (options.fast ? Math.round(n / 4) : n);
  const runtime = createRuntime({ max_concurrent_children: 3, max_spawn_depth: 2 });
  const entries = new Map<string, CompletionEntry>();
  const story = new Story(out, () => runtime.list({ include_finished: true }));
  const say = (line: string) => story.say(line);

  const handle = runtime.delegate(storyTasks(ms));
  const [research, summarize, crawl] = threeIds(handle.subagent_ids);
  say(`delegated ${handle.subagent_ids.length} children (${handle.delegation_id})`);

  const timers: NodeJS.Timeout[] = [];
  const later = (delay: number, fn: () => void) => timers.push(setTimeout(fn, ms(delay)));
  const stop = runtime.events.subscribe('subagent.**', (e) => {
    const id = String(e.subagent_id);
    if (e.type === 'subagent.text' && id === research && e.text === STORY_STEERS.research.when) {
      later(300, () => steer(research, STORY_STEERS.research.text));
    }
    if (e.type === 'subagent.text' && id === summarize && e.text === STORY_STEERS.summarize.when) {
      // Its only delivery point (after the tool) is behind it and only a sleep and the finish
      // remain: this steer is accepted but cannot land, whatever the timing.
      steer(summarize, STORY_STEERS.summarize.text);
    }
    if (e.type === 'subagent.tool' && e.parent_id === crawl) {
      later(600, () => {
        const r = runtime.interrupt(crawl);
        say(`interrupt ${crawl}: found=${r.found}, stopped [${r.interrupted.join(', ')}]`);
      });
    }
    if (e.type === 'subagent.steer.delivered') say(`delivered to ${id}: ${JSON.stringify(e.text)} (${e.steer_id})`);
    if (e.type === 'subagent.complete' && isCompletionEntry(e.entry)) {
      const entry = e.entry;
      entries.set(id, entry);
      // The summarize child's steer arrived while its only steps left were a sleep and the finish:
      // neither is a delivery point, so the steer could never land and comes back on the entry.
      const why =
        id === summarize ? 'it was sent during a step with no delivery point (a sleep, then the finish)' : 'the child finished before its next delivery point';
      say(`${id} finished: ${entry.status}${entry.missed_steer ? `; its steer missed: ${why}, so the text is back in missed_steer` : ''}`);
    }
  });
  const steer = (id: string, text: string) => {
    const r = runtime.steer(id, text);
    say(`steer ${id}: ${r.status}${r.status === 'queued' ? ` as ${r.steer_id} (accepted, not yet delivered)` : ''}`);
  };

  story.live(200);
  const results = await handle.results;
  for (const t of timers) clearTimeout(t);
  stop();
  story.end();

  out.write("\nCompletion entries (the parent gets the first three; the grandchild's went to its parent):\n");
  for (const entry of [...results, ...[...entries.values()].filter((e) => !results.includes(e))]) {
    out.write(`${JSON.stringify(entry, null, 2)}\n`);
  }
  const ok =
    results[0]?.status === 'completed' &&
    results[1]?.missed_steer !== undefined &&
    results[2]?.status === 'interrupted' &&
    [...entries.values()].every((e) => e.status !== 'error');
  return ok ? 0 : 1;
}

/**
 * How the demo tells its story. On a terminal: a live roster redrawn in place, with the last
 * lines of the story under it. Elsewhere (a pipe, a file, CI): each line of the story once, as it
 * happens, and the roster once at the end; a redrawn roster is only noise in a log.
 */
class Story {
  readonly #out: NodeJS.WritableStream & { isTTY?: boolean };
  readonly #children: () => Snapshot[];
  readonly #log: string[] = [];
  #lines = 0;
  #ticker: NodeJS.Timeout | undefined;

  constructor(out: NodeJS.WritableStream & { isTTY?: boolean }, children: () => Snapshot[]) {
    this.#out = out;
    this.#children = children;
  }

  say(line: string): void {
    this.#log.push(line);
    if (this.#out.isTTY) this.#draw();
    else this.#out.write(`  ${line}\n`);
  }

  /** On a terminal, redraws every `ms` while children run (tool counts move between lines). */
  live(ms: number): void {
    if (this.#out.isTTY) this.#ticker = setInterval(() => this.#draw(), ms);
  }

  end(): void {
    clearInterval(this.#ticker);
    if (this.#out.isTTY) this.#draw();
    else this.#out.write(`\n${this.#roster().join('\n')}\n`);
  }

  #roster(): string[] {
    const rows = [...this.#children()].sort((a, b) => (a.started_at ?? Infinity) - (b.started_at ?? Infinity) || a.depth - b.depth);
    return [
      'subagent            status       tools  last tool     goal',
      ...treeOrder(rows).map(
        (s) =>
          `${pad(`${'  '.repeat(s.depth)}${s.subagent_id}`, 19)} ${pad(s.status + (s.accepting_steer ? '' : '*'), 12)} ${pad(String(s.tool_count), 6)} ${pad(s.last_tool || '-', 13)} ${s.goal}`,
      ),
      '(* = no longer accepting steers)',
    ];
  }

  #draw(): void {
    const lines = [...this.#roster(), ...this.#log.slice(-8).map((l) => `  ${l}`)];
    if (this.#lines > 0) this.#out.write(`\x1b[${this.#lines}A\x1b[J`);
    this.#out.write(`${lines.join('\n')}\n`);
    this.#lines = lines.length;
  }
}

function treeOrder(rows: Snapshot[]): Snapshot[] {
  const byParent = new Map<string | null, Snapshot[]>();
  for (const r of rows) byParent.set(r.parent_id, [...(byParent.get(r.parent_id) ?? []), r]);
  const out: Snapshot[] = [];
  const visit = (parent: string | null) => {
    for (const r of byParent.get(parent) ?? []) {
      out.push(r);
      visit(r.subagent_id);
    }
  };
  visit(null);
  return out;
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}
