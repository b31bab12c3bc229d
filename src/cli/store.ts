// `subrun store stats`: what a state directory's database holds (its size and its counts), for an
// operator checking that it stays bounded. It takes the directory's lock like a server does, so
// on a directory a server is using it prints the one line naming that server, and exit 2.
import { resolve as resolvePath } from 'node:path';
import { helpText, parseFlags, UsageError, wantsHelp, type FlagSpec } from './flags.ts';
import { defaultStateDir } from './state-dir.ts';

export const STORE_FLAGS = [
  {
    flag: 'state-dir',
    env: 'SUBRUN_STATE_DIR',
    kind: 'string',
    arg: 'DIR',
    help: 'the state directory (default $XDG_STATE_HOME/subrun or ~/.local/state/subrun)',
  },
  { flag: 'json', kind: 'bool', help: 'print the figures as one JSON object' },
] as const satisfies readonly FlagSpec[];

const USAGE = `usage: subrun store stats [options]

Prints the size of a state directory's database and what it holds: sessions, events, children
(and how many never finished), steers, delegations and kept answers (docs/durability.md).`;

export async function store(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(USAGE, STORE_FLAGS));
    return 0;
  }
  const { values: v, positionals } = parseFlags(argv, STORE_FLAGS);
  if (positionals[0] !== 'stats' || positionals.length > 1) throw new UsageError('usage: subrun store stats [--state-dir DIR] [--json]');
  const dir = resolvePath(v['state-dir'] ?? defaultStateDir());
  const [{ SqliteStore }, { StoreOpenError }] = await Promise.all([import('../store/sqlite.ts'), import('../store/open.ts')]);
  let opened;
  try {
    opened = SqliteStore.open(dir);
  } catch (err) {
    if (!(err instanceof StoreOpenError)) throw err;
    process.stderr.write(`subrun: ${err.message}\n`);
    return 2;
  }
  try {
    const s = opened.stats();
    if (v.json === true) process.stdout.write(`${JSON.stringify(s)}\n`);
    else {
      const rows: Array<[string, string | number]> = [
        ['database', s.path],
        ['bytes', s.bytes],
        ['schema version', s.schema_version],
        ['sessions', s.sessions],
        ['events', s.events],
        ['children', s.children],
        ['  unfinished', s.unfinished_children],
        ['steers', s.steers],
        ['delegations', s.delegations],
        ['kept answers', s.answers],
      ];
      for (const [k, val] of rows) process.stdout.write(`${k.padEnd(16)}${val}\n`);
    }
  } finally {
    opened.close();
  }
  return 0;
}
