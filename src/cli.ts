// `subrun` command line: parses the command and its flags, runs it, and maps failures to a
// one-line reason and an exit code (2 for bad usage). Nothing else lives here.
import { runDemo } from './demo.ts';
import { VERSION } from './version.ts';

const USAGE = `usage: subrun <command> [options]

commands:
  demo        run the scripted demo: three children, a grandchild, steering and an interrupt
  --version   print the version
  --help      this text
`;

export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case '--version':
    case '-v':
      process.stdout.write(`${VERSION}\n`);
      return 0;
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      process.stdout.write(USAGE);
      return command === undefined ? 2 : 0;
    case 'demo':
      return runDemo({ fast: rest.includes('--fast') });
    default:
      process.stderr.write(`subrun: unknown command ${JSON.stringify(command)}\n${USAGE}`);
      return 2;
  }
}

// Run directly (`tsx src/cli.ts ...`), not when imported by bin/subrun.js or a test.
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`subrun: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
