// `subrun watch`: a session's events as they come, as JSON lines or (`--format pretty`) one line a
// person reads each. With `--reconnect`, a lost connection is dialled again with backoff; once
// re-attached, the watcher replays what it missed with session.events.since from the last seq it
// printed, so every event is printed once, in order, and says each step on stderr.
import { isWireEvent } from '../contract/events.ts';
import { AttachError, CLIENT_FLAGS, connect, formatError, isJson, RefusedError, type Json, type RpcClient } from './client.ts';
import { eventLine } from './event-line.ts';
import { helpText, parseFlags, UsageError, wantsHelp, type FlagSpec } from './flags.ts';

export const WATCH_FLAGS = [
  ...CLIENT_FLAGS,
  {
    flag: 'format',
    env: 'SUBRUN_WATCH_FORMAT',
    kind: 'string',
    arg: 'F',
    help: 'json (one JSON event per line; the default) or pretty (one readable line each)',
  },
  {
    flag: 'reconnect',
    kind: 'bool',
    help: 'when the connection drops, dial again (backoff 250 ms doubling to 5 s) and resume after the last seq printed',
  },
] as const satisfies readonly FlagSpec[];

const WATCH_USAGE = `usage: subrun watch --session ID --key KEY [options]

Prints a session's events until Ctrl-C: JSON lines, or with --format pretty one readable line each.
Without --reconnect it ends (exit 1) when the server goes away; with it, it waits for the server
and resumes where it left off.`;

const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5000;

type Printer = (event: Json) => void;

function printerFor(format: string): Printer {
  if (format === 'json') return (e) => process.stdout.write(`${JSON.stringify(e)}\n`);
  if (format === 'pretty') return (e) => process.stdout.write(`${isWireEvent(e) ? eventLine(e) : JSON.stringify(e)}\n`);
  throw new UsageError(`--format must be json or pretty, got ${JSON.stringify(format)}`);
}

const seqOf = (e: Json): number => (typeof e.seq === 'number' ? e.seq : -1);

/** `subrun watch --session S --key K [--format pretty] [--reconnect]`. */
export async function watch(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(WATCH_USAGE, WATCH_FLAGS));
    return 0;
  }
  const { values: v } = parseFlags(argv, WATCH_FLAGS);
  if (v.session === undefined || v.key === undefined) throw new UsageError('watch needs --session and --key');
  const print = printerFor(v.format ?? 'json');
  const session = v.session;
  const key = v.key;
  const stopped = new Promise<'stopped'>((resolve) => process.once('SIGINT', () => resolve('stopped')));

  // The last seq printed: an event at or below it was printed already (a replay overlaps).
  let last = 0;
  const emit = (e: Json) => {
    if (seqOf(e) <= last) return;
    last = seqOf(e);
    print(e);
  };

  /** One connection: attached, its gap replayed (after the first), then live until it closes. */
  const attachOnce = async (resume: boolean): Promise<{ client: RpcClient }> => {
    // Live events wait while the gap is replayed, so the replay's older events print first.
    let held: Json[] | undefined = resume ? [] : undefined;
    const { client } = await connect(v, (params) => {
      // The greeting is the connection's, not the session's.
      if (!isJson(params) || params.type === 'gateway.ready') return;
      if (held) held.push(params);
      else emit(params);
    });
    if (held) {
      const r = await client.call('session.events.since', { session_id: session, session_key: key, last_seen: last });
      if (r.error) {
        client.close();
        throw new AttachError(`replay failed: ${formatError(r.error)}`);
      }
      const result = isJson(r.result) ? r.result : {};
      const events = Array.isArray(result.events) ? result.events.filter(isJson) : [];
      const from = last;
      if (result.truncated === true) process.stderr.write(`subrun: events after seq ${from} already left the replay ring; some were missed\n`);
      for (const e of events) emit(e);
      for (const e of held.sort((a, b) => seqOf(a) - seqOf(b))) emit(e);
      held = undefined;
      process.stderr.write(`subrun: reconnected; resumed after seq ${from} (${events.length} missed event${events.length === 1 ? '' : 's'} replayed)\n`);
    }
    return { client };
  };

  let { client } = await attachOnce(false);
  process.stderr.write(`watching ${session}; Ctrl-C to stop\n`);
  for (;;) {
    const why = await Promise.race([stopped, client.closed.then(() => 'closed' as const)]);
    client.close();
    if (why === 'stopped') return 0;
    // The server went away (stopped, restarted, or cut this watcher): said, never a silent end.
    if (v.reconnect !== true) {
      process.stderr.write(
        'subrun: the server closed the connection; run watch again with --reconnect to resume (session.events.since replays what was missed)\n',
      );
      return 1;
    }
    const next = await redial(() => attachOnce(true), stopped, last);
    if (next === 'stopped') return 0;
    if (next instanceof Error) {
      process.stderr.write(`subrun: ${next.message}\n`);
      return 1;
    }
    client = next.client;
  }
}

/** Dials until a connection attaches (backoff doubling to MAX_BACKOFF_MS), Ctrl-C, or an attach refused. */
async function redial<T>(attempt: () => Promise<T>, stopped: Promise<'stopped'>, last: number): Promise<T | 'stopped' | Error> {
  let wait = FIRST_BACKOFF_MS;
  for (let n = 1; ; n++) {
    process.stderr.write(`subrun: connection lost after seq ${last}; reconnecting in ${wait} ms (attempt ${n})\n`);
    let timer: NodeJS.Timeout | undefined;
    const slept = await Promise.race([stopped, new Promise<'slept'>((resolve) => (timer = setTimeout(() => resolve('slept'), wait)))]);
    clearTimeout(timer);
    if (slept === 'stopped') return 'stopped';
    try {
      return await attempt();
    } catch (err) {
      // The server answered and refused the token or the session (gone after a restart without
      // state, or the key is wrong): dialling again cannot help.
      if (err instanceof AttachError || err instanceof RefusedError) return err;
      // Not listening yet, or the connection dropped again: wait longer.
    }
    wait = Math.min(MAX_BACKOFF_MS, wait * 2);
  }
}
