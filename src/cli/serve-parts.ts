// The parts `subrun serve` starts with (serve.ts): its stores (a state directory's SQLite file, or
// the state on JetStream), the NATS link with the control plane's lease, the remote placement, the
// listener, and the wait for stdout to drain. Each failure a person meets is one line and an exit
// code (2 at start, 3 when fenced), never a stack.
import type { FlagValues } from './flags.ts';
import { UsageError } from './flags.ts';
import type { SERVE_FLAGS } from './serve-flags.ts';
import type { Placement } from '../remote/control/placement.ts';
import type { Lease } from '../remote/control/lease.ts';
import type { NatsLink } from '../remote/nats.ts';
import type { createLogger } from '../log.ts';
import type { StdioTransport } from '../rpc/transports/stdio.ts';
import { listenWs, type WsListener } from '../rpc/transports/ws.ts';
import type { SqliteStore } from '../store/sqlite.ts';
import { errorCode } from '../guards.ts';

/** The state directory's store; one that cannot be opened (in use, corrupt, too open, from the future) is one line and exit 2. */
export async function openStore(dir: string, fsync: 'normal' | 'full', logger: ReturnType<typeof createLogger>): Promise<SqliteStore> {
  const [{ SqliteStore }, { StoreOpenError }] = await Promise.all([import('../store/sqlite.ts'), import('../store/open.ts')]);
  try {
    return SqliteStore.open(dir, { fsync, logger });
  } catch (err) {
    if (!(err instanceof StoreOpenError)) throw err;
    process.stderr.write(`subrun: ${err.message}\n`);
    process.exit(2);
  }
}

/**
 * The control plane's state on JetStream (--store jetstream): loaded and claimed after the lease
 * is taken. One that cannot be read is one line and exit 2; fenced later, one line and exit 3.
 */
export async function openJetStream(link: NatsLink, logger: ReturnType<typeof createLogger>): Promise<SqliteStore> {
  const [{ openJetStreamStore }, { StoreOpenError }, { describe }] = await Promise.all([
    import('../remote/control/state/open.ts'),
    import('../store/open.ts'),
    import('../remote/nats.ts'),
  ]);
  try {
    const opened = await openJetStreamStore({
      js: link.js,
      jsm: link.jsm,
      logger,
      onFenced: (why) => {
        process.stderr.write(`subrun: ${why}; this control plane stops serving (exit 3)\n`);
        process.exit(3);
      },
    });
    logger.info(opened.loaded, 'state loaded from JetStream');
    return opened.store;
  } catch (err) {
    const why = err instanceof StoreOpenError ? err.message : `cannot open the state on JetStream: ${describe(err)}`;
    process.stderr.write(`subrun: ${why}\n`);
    process.exit(2);
  }
}

/**
 * The NATS link and the control plane's lease on it. NATS unreachable (or without JetStream), or a
 * live leader without --standby, is one line and exit 2; losing the lease later is one line and exit 3.
 */
export async function takeLead(
  url: string,
  v: Pick<FlagValues<typeof SERVE_FLAGS>, 'standby' | 'lease-ms'>,
  logger: ReturnType<typeof createLogger>,
): Promise<{ link: NatsLink; lease: Lease }> {
  // Loaded only with --nats: the NATS client costs the in-process server nothing at start.
  const [{ openNats, NatsStartError }, { Lease, LeaseHeldError }] = await Promise.all([import('../remote/nats.ts'), import('../remote/control/lease.ts')]);
  const fail = (message: string): never => {
    process.stderr.write(`subrun: ${message}\n`);
    // A failed handshake can leave a socket open: exit now, not when it times out.
    process.exit(2);
  };
  let link: NatsLink;
  try {
    link = await openNats(url, 'subrun-control-plane');
  } catch (err) {
    if (!(err instanceof NatsStartError)) throw err;
    return fail(err.message);
  }
  // A standby serves nothing and owes nothing while it waits: a signal just ends it.
  const quit = () => process.exit(0);
  process.once('SIGINT', quit).once('SIGTERM', quit);
  try {
    const lease = await Lease.acquire({
      link,
      lease_ms: v['lease-ms'],
      standby: v.standby === true,
      logger,
      // Fenced: another plane may lead now. No shutdown: stopping the children would act on them.
      onLost: (why) => {
        process.stderr.write(`subrun: ${why}; this control plane stops serving (exit 3)\n`);
        process.exit(3);
      },
    });
    return { link, lease };
  } catch (err) {
    if (!(err instanceof LeaseHeldError || err instanceof NatsStartError)) throw err;
    return fail(err.message);
  } finally {
    process.off('SIGINT', quit).off('SIGTERM', quit);
  }
}

/** The remote placement on the link whose lease this process holds. */
export async function attachPlacement(
  link: NatsLink,
  v: Pick<FlagValues<typeof SERVE_FLAGS>, 'worker-loss-ms' | 'nats-outage-ms'>,
  logger: ReturnType<typeof createLogger>,
): Promise<Placement> {
  const { Placement } = await import('../remote/control/placement.ts');
  return Placement.attach(link, { worker_loss_ms: v['worker-loss-ms'], nats_outage_ms: v['nats-outage-ms'], logger });
}

/** listenWs, with the two failures a person meets named with their way out (one line, exit 2). */
export async function listenOrSay(...args: Parameters<typeof listenWs>): Promise<WsListener> {
  try {
    return await listenWs(...args);
  } catch (err) {
    const where = `${args[0].host}:${args[0].port}`;
    const code = errorCode(err);
    if (code === 'EADDRINUSE') throw new UsageError(`${where} is in use: stop what holds it, or pick another port with --port N (--port 0: any free port)`);
    if (code === 'EACCES') throw new UsageError(`no permission to listen on ${where}: pick a port above 1023 with --port N (--port 0: any free port)`);
    if (code === 'EADDRNOTAVAIL') throw new UsageError(`${args[0].host} is no address of this machine: pick another with --host (default 127.0.0.1)`);
    throw err;
  }
}

/** Waits up to `grace_ms` for stdout to take everything; false if it did not (the host is cut). */
export async function drainedWithin(stdio: StdioTransport, grace_ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), grace_ms);
  });
  const drained = await Promise.race([stdio.drained().then(() => true), deadline]);
  clearTimeout(timer);
  return drained;
}
