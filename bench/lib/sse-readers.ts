// Reader processes for the SSE rows (bench/servers/sse-reader.ts, one stream each): the coordinator
// starts them, fires a round, and waits for each to report the round's `session.idle` frame.
import { startProcess, type ServerProcess } from './rpc.ts';

export interface ReaderRound {
  /** Frames each reader counted this round. */
  readonly frames: readonly number[];
  /** CPU each reader spent this round, µs. */
  readonly cpu: readonly number[];
}

export interface Readers {
  readonly count: number;
  /** Resolves with the round once every reader has seen the next `session.idle`. */
  next(): Promise<ReaderRound>;
  stop(): Promise<void>;
}

interface One {
  readonly proc: ServerProcess;
  readonly lines: string[];
  wake?: () => void;
  lastCpu: number;
}

async function line(r: One): Promise<string> {
  while (r.lines.length === 0) {
    if (r.proc.child.exitCode !== null) throw new Error(`sse-reader exited: ${r.proc.stderr().slice(-500)}`);
    await new Promise<void>((wake) => (r.wake = wake));
  }
  return r.lines.shift() ?? '';
}

export async function startReaders(n: number, port: number, path: string, token: string): Promise<Readers> {
  const all: One[] = [];
  for (let i = 0; i < n; i++) {
    const proc = startProcess(['--import', 'tsx', 'bench/servers/sse-reader.ts'], { SSE_PORT: String(port), SSE_PATH: path, SSE_TOKEN: token });
    const r: One = { proc, lines: [], lastCpu: 0 };
    let rest = '';
    proc.child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      const parts = (rest + d).split('\n');
      rest = parts.pop() ?? '';
      r.lines.push(...parts);
      r.wake?.();
    });
    proc.child.once('exit', () => r.wake?.());
    all.push(r);
  }
  for (const r of all) {
    const [word, cpu] = (await line(r)).split(' ');
    if (word !== 'ready') throw new Error(`sse-reader said ${word}`);
    r.lastCpu = Number(cpu);
  }
  return {
    count: n,
    async next() {
      const got = await Promise.all(all.map(line));
      const frames: number[] = [];
      const cpu: number[] = [];
      got.forEach((l, i) => {
        const [, f, c] = l.split(' ');
        const r = all[i];
        if (!r) return;
        frames.push(Number(f));
        cpu.push(Number(c) - r.lastCpu);
        r.lastCpu = Number(c);
      });
      return { frames, cpu };
    },
    async stop() {
      // stop() sends SIGTERM and waits for the exit (SIGKILL after 5 s).
      await Promise.all(all.map((r) => r.proc.stop()));
    },
  };
}
