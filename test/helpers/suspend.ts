// Stalling a process the way the tests mean it: every thread stopped, not just signalled. kill()
// returns as soon as SIGSTOP is pending; the kernel then stops a multi-threaded process (a Go
// nats-server, any node) thread by thread as each next runs, and a thread that is not scheduled
// yet (a loaded machine) keeps serving meanwhile: a JetStream publish sent right after the signal
// was seen acked (steer-ack-late). The group stop's end is an event: the kernel sends the parent
// SIGCHLD (CLD_STOPPED) once the last thread has stopped, and /proc says so. Linux only.
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { WAIT_MS } from './process.ts';

/** Each thread's state letter (R, S, D, T, ...) as /proc/<pid>/task/<tid>/stat gives it. */
export function threadStates(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      return 'gone'; // a thread that exited between the listing and the read
    }
    // "tid (comm) S ...": comm may hold spaces and parentheses; the state follows the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  });
}

/** Whether every thread of `pid` is in group stop (a thread that exited meanwhile does not count). */
export function allStopped(pid: number): boolean {
  return threadStates(pid).every((s) => s === 'T' || s === 'gone');
}

/** SIGSTOP, then resolves once every thread of `child` is stopped (at most `ms`). */
export async function suspend(child: ChildProcess, ms = WAIT_MS): Promise<void> {
  const pid = child.pid;
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) throw new Error('suspend: the process is not running');
  let onChild: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onChild = () => {
        try {
          if (allStopped(pid)) resolve();
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err))); // /proc/<pid> gone: it exited
        }
      };
      // Listening before the signal: the SIGCHLD of this stop cannot come before the listener.
      process.on('SIGCHLD', onChild);
      timer = setTimeout(() => reject(new Error(`suspend: pid ${pid} not stopped after ${ms} ms: ${threadStates(pid).join('')}`)), ms);
      if (!child.kill('SIGSTOP')) reject(new Error(`suspend: could not signal pid ${pid}`));
      // Stopped already by the time we look (an idle process often is): no SIGCHLD to wait for.
      onChild();
    });
  } finally {
    if (onChild) process.off('SIGCHLD', onChild);
    clearTimeout(timer);
  }
}

/** SIGCONT: the kernel wakes every stopped thread before kill() returns. */
export function resume(child: ChildProcess): void {
  child.kill('SIGCONT');
}
