// The stall the remote tests rely on: once suspend() resolves, every thread of the process is
// stopped, so nothing it receives from then on is answered until it resumes. kill(SIGSTOP) alone
// does not give that: it returns while threads still run (at idle, right after kill, about half
// the rounds found a thread not yet stopped; under load a nats-server acked a steer published
// after the signal, and steer-ack-late heard a plain `queued`). Real processes: a nats-server -js
// (Go: many threads) and a node process (libuv and V8 threads), as the workers and planes are.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startNats, type Nats } from '../helpers/nats.ts';
import { allStopped, resume, suspend, threadStates } from '../helpers/suspend.ts';

let nats: Nats;
beforeAll(async () => {
  nats = await startNats();
});
afterAll(async () => {
  nats?.resume();
  await nats?.dispose();
});

const ROUNDS = 20;

it('a suspended nats-server has every thread stopped, round after round, and runs again on resume', async () => {
  for (let i = 0; i < ROUNDS; i++) {
    await nats.suspend();
    expect(allStopped(nats.pid), `round ${i}`).toBe(true);
    nats.resume();
  }
});

it('a suspended node process has every thread stopped, round after round', async () => {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000); console.log("up")'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.stdout.once('data', () => resolve());
    });
    const pid = child.pid ?? expect.unreachable('spawned without a pid');
    expect(threadStates(pid).length).toBeGreaterThan(1);
    for (let i = 0; i < ROUNDS; i++) {
      await suspend(child);
      expect(allStopped(pid), `round ${i}`).toBe(true);
      resume(child);
    }
  } finally {
    child.kill('SIGKILL');
  }
});
