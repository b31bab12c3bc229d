// `subrun` command line: picks the command, runs it, and maps failures to a one-line reason and
// an exit code (2 for bad usage, 1 for a failed call). Nothing else lives here.
// Each command is imported only when it runs: `--version` or `call` should not pay for the
// server's modules at start-up.
import { UsageError } from './flags.ts';
import { closest } from '../suggest.ts';
import { VERSION } from '../version.ts';

const COMMANDS = ['demo', 'serve', 'worker', 'store', 'call', 'watch', 'help', 'version'];

const USAGE = `usage: subrun <command> [options]

commands:
  demo                         the scripted demo: three children, a grandchild, steering, an interrupt
                               (--ui: on a server, with the dashboard's link printed, to watch)
  serve --stdio | --ws         the server for hosts: JSON-RPC over stdio or WebSocket
  serve --acp                  the Agent Client Protocol adapter for IDEs (docs/acp.md)
  worker --nats URL            run children for a serve --nats control plane (docs/scale-out.md)
  store stats                  the size and counts of a state directory's database (docs/durability.md)
  call METHOD [PARAMS_JSON]    one call to a running --ws server; prints the result as JSON
  watch --session ID --key K   print a session's events as they come (--format pretty, --reconnect)
  --version, version           print the version
  --help, help [COMMAND]       this text, or a command's

\`subrun <command> --help\` (or \`subrun help <command>\`) lists a command's options and their
environment twins.
`;

export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case '--version':
      case '-v':
      case 'version':
        process.stdout.write(`${VERSION}\n`);
        return 0;
      case 'help':
        // `subrun help serve` is `subrun serve --help`.
        if (rest[0] !== undefined && COMMANDS.includes(rest[0]) && rest[0] !== 'help' && rest[0] !== 'version') return await main([rest[0], '--help']);
        if (rest[0] !== undefined) throw new UsageError(`no command ${JSON.stringify(rest[0])}${hint(rest[0])}; try subrun --help`);
        process.stdout.write(USAGE);
        return 0;
      case undefined:
      case '--help':
      case '-h':
        process.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      case 'demo':
        quietOnBrokenPipe();
        return await (await import('./demo.ts')).demoCommand(rest);
      case 'serve':
        return await (await import('./serve.ts')).serve(rest);
      case 'worker':
        return await (await import('./worker.ts')).worker(rest);
      case 'store':
        return await (await import('./store.ts')).store(rest);
      case 'call':
        quietOnBrokenPipe();
        return await (await import('./client.ts')).call(rest);
      case 'watch':
        quietOnBrokenPipe();
        return await (await import('./watch.ts')).watch(rest);
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}${hint(command)}; try subrun --help`);
    }
  } catch (err) {
    process.stderr.write(`subrun: ${err instanceof Error ? err.message : String(err)}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

function hint(command: string): string {
  const near = closest(command.replace(/^-+/, ''), COMMANDS);
  return near === undefined ? '' : ` (did you mean ${near}?)`;
}

/**
 * `subrun demo | head` closes the pipe early: that is the reader's choice, not a failure, so the
 * command ends quietly instead of dying on an unhandled EPIPE. (`serve --stdio` handles its own
 * stdout: a host hanging up there starts the shutdown.)
 */
function quietOnBrokenPipe(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(0);
  });
}

// Run directly (`tsx src/cli/main.ts ...`), not when imported by bin/subrun.js or a test.
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
