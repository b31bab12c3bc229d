// Reads a process's resident memory from /proc (Linux): the figure the memory-bound tests of
// fuzz.input and soak assert on. No timing involved: a read is a snapshot.
import { readFileSync } from 'node:fs';

/** VmRSS of `pid` in KiB; throws if the process is gone or /proc has no such line. */
export function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]);
}

/** KiB as MiB with one decimal, for the figures the tests print. */
export const mib = (kib: number): string => `${(kib / 1024).toFixed(1)} MiB`;
