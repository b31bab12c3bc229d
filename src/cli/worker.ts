// `subrun worker --nats URL`: a worker process for a control plane started with
// `subrun serve ... --nats URL`. It runs children with the built-in runner kinds (scripted, and
// openai when given the model options). NATS unreachable or without JetStream at start: one line
// on stderr and exit 2. SIGTERM/SIGINT: stop taking children, interrupt those it holds, send
// their outcomes, exit 0.
import { helpText, parseFlags, UsageError, wantsHelp, type FlagSpec } from './flags.ts';
import { openaiKind } from '../agent/runner.ts';
import { builtinRunnerKinds } from '../delegation/runners/kinds.ts';
import { LOG_FLAGS, loggerFromFlags } from './log-flags.ts';
import { MODEL_FLAGS, modelConfig } from './model-options.ts';
import { NatsStartError } from '../remote/nats.ts';
import { Worker } from '../remote/worker/worker.ts';

export const WORKER_FLAGS = [
  {
    flag: 'nats',
    env: 'SUBRUN_NATS',
    kind: 'string',
    arg: 'URL',
    help: 'the NATS server with JetStream the control plane uses, e.g. nats://127.0.0.1:4222 (required)',
  },
  {
    flag: 'max-children',
    env: 'SUBRUN_MAX_CHILDREN',
    kind: 'int',
    min: 1,
    max: 10_000,
    help: 'children this worker runs at once; one waiting for its own children does not count (default 16)',
  },
  {
    flag: 'worker-heartbeat-ms',
    env: 'SUBRUN_WORKER_HEARTBEAT_MS',
    kind: 'int',
    min: 50,
    max: 60_000,
    help: "heartbeat period; keep it well under the control plane's --worker-loss-ms (default 1000)",
  },
  ...LOG_FLAGS,
  ...MODEL_FLAGS,
] as const satisfies readonly FlagSpec[];

const WORKER_USAGE = `usage: subrun worker --nats URL [options]

Runs children for a control plane started with \`subrun serve ... --nats URL\` (docs/scale-out.md),
with the built-in runner kinds: scripted, and openai when given the model options.`;

export async function worker(argv: readonly string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(helpText(WORKER_USAGE, WORKER_FLAGS));
    return 0;
  }
  const { values: v, positionals, sources } = parseFlags(argv, WORKER_FLAGS);
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  const url = v.nats;
  if (url === undefined) throw new UsageError('worker needs --nats URL (or SUBRUN_NATS)');
  const logger = loggerFromFlags(v);
  // A retried model request says so on this logger (info).
  const model = modelConfig(v, sources);
  const openai = model && { ...model, logger };
  let w: Worker;
  try {
    w = await Worker.start({
      url,
      max_children: v['max-children'],
      heartbeat_ms: v['worker-heartbeat-ms'],
      kinds: { ...builtinRunnerKinds, openai: openaiKind(openai) },
      logger,
    });
  } catch (err) {
    if (!(err instanceof NatsStartError)) throw err;
    process.stderr.write(`subrun: ${err.message}\n`);
    // A failed handshake can leave a socket open: exit now, not when it times out.
    process.exit(2);
  }
  process.stderr.write(`subrun worker ${w.id} on ${url}\n`);
  await new Promise<void>((resolve) => {
    let stopping = false;
    for (const sig of ['SIGINT', 'SIGTERM'] as const) {
      process.on(sig, () => {
        if (stopping) return;
        stopping = true;
        void w.stop().then(resolve);
      });
    }
  });
  return 0;
}
