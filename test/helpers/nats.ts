// A real nats-server with JetStream for the scale-out tests: on 127.0.0.1, a free port, its store
// in a temp dir, ready when it logs "Server is ready" (never a sleep). Also the workers, as real
// `subrun worker` processes. Fails with a clear message when nats-server is not installed.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { spawnSubrun, WAIT_MS, type Proc } from './process.ts';
import { resume, suspend } from './suspend.ts';

/** NATS_SERVER, else nats-server on PATH, else Debian's /usr/sbin/nats-server. */
export function findNatsServer(): string {
  const explicit = process.env.NATS_SERVER;
  if (explicit) {
    if (!existsSync(explicit)) throw new Error(`NATS_SERVER=${explicit} does not exist`);
    return explicit;
  }
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin'];
  for (const d of dirs) {
    const p = join(d, 'nats-server');
    if (d && existsSync(p)) return p;
  }
  throw new Error(
    'nats-server not found: the scale-out tests need nats-server 2.9+ (JetStream). On Debian/Ubuntu: sudo apt-get install -y nats-server; elsewhere put nats-server on PATH or set NATS_SERVER=/path/to/nats-server',
  );
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface Nats {
  readonly url: string;
  readonly port: number;
  /** The nats-server's own pid (spawned without a shell), the one the signals go to. */
  readonly pid: number;
  /** Stops it (SIGTERM by default: a SIGKILLed 2.9 may lose its last consumer state). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and store. */
  restart(): Promise<void>;
  /**
   * Stalls it without dropping a connection: resolves once every thread is stopped (SIGSTOP's
   * kill() returns before that, and a thread not yet stopped still acks: suspend.ts).
   */
  suspend(): Promise<void>;
  /** Lets a stalled server go on (SIGCONT); nothing if it is not running. */
  resume(): void;
  /** Stops it and removes its store. */
  dispose(): Promise<void>;
}

export async function startNats(): Promise<Nats> {
  const bin = findNatsServer();
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'subrun-nats-'));
  let proc: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const launch = async () => {
    const p = spawn(bin, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], { stdio: ['ignore', 'ignore', 'pipe'] });
    proc = p;
    exited = new Promise((resolve) => p.once('exit', () => resolve()));
    let log = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`nats-server not ready in ${WAIT_MS} ms:\n${log}`)), WAIT_MS);
      p.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`nats-server exited:\n${log}`));
      });
      p.stderr?.setEncoding('utf8');
      p.stderr?.on('data', (d: string) => {
        log += d;
        if (log.includes('Server is ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
  };
  await launch();
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
    await exited;
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    get pid() {
      return proc?.pid ?? -1;
    },
    stop,
    restart: launch,
    async suspend() {
      if (!proc) throw new Error('nats-server is not running');
      await suspend(proc);
    },
    resume() {
      if (proc && proc.exitCode === null && proc.signalCode === null) resume(proc);
    },
    async dispose() {
      await stop('SIGKILL');
      rmSync(store, { recursive: true, force: true });
    },
  };
}

export interface WorkerProc {
  readonly proc: Proc;
  readonly id: string;
}

/** Starts `subrun worker --nats URL ...args` (with `env` added) and waits for its ready line. */
export async function startWorker(url: string, args: readonly string[] = [], env: Record<string, string> = {}): Promise<WorkerProc> {
  const proc = spawnSubrun(['worker', '--nats', url, ...args], env);
  const line = await proc.stderr.take((l) => l.startsWith('subrun worker '), WAIT_MS, 'the worker ready line');
  return { proc, id: line.split(' ')[2] as string };
}

/** The epoch `child` holds on `worker`, as the worker's next heartbeat that lists it says. */
export async function epochOf(nc: NatsConnection, worker: string, child: string): Promise<number> {
  const sub = nc.subscribe(`sr.hb.${worker}`);
  try {
    for await (const m of sub) {
      const hb = JSON.parse(new TextDecoder().decode(m.data)) as { children: Array<{ child: string; epoch: number }> };
      const held = hb.children.find((c) => c.child === child);
      if (held) return held.epoch;
    }
  } finally {
    sub.unsubscribe();
  }
  throw new Error('no heartbeat');
}
