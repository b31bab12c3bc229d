// `--log-format pretty`: pino's JSON lines as one readable line each, on stderr, with no dependency:
// `14:03:07.512 INFO  child started subagent_id=sa_… parent_id=null`. pino still builds the record (the
// serializers keep stacks out); this destination only reformats it, synchronously, like fd 2.
import { writeSync } from 'node:fs';
import { isRecord } from './guards.ts';

const LEVELS: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** pino's own fields, said by the line's head (or not at all). */
const HEAD = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'name']);

function value(v: unknown): string {
  if (typeof v === 'string') return v !== '' && !/[\s"=]/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v);
}

/** One pino JSON line as `HH:MM:SS.mmm LEVEL msg key=value ...` (a line that is not JSON stays as it is). */
export function prettyLine(line: string): string {
  let record: unknown;
  try {
    record = JSON.parse(line);
  } catch {
    return line;
  }
  if (!isRecord(record)) return line;
  const time = typeof record.time === 'number' ? new Date(record.time).toISOString().slice(11, 23) : '';
  const level = typeof record.level === 'number' ? (LEVELS[record.level] ?? String(record.level)) : String(record.level);
  const fields = Object.entries(record)
    .filter(([k]) => !HEAD.has(k))
    .map(([k, v]) => `${k}=${value(v)}`);
  const msg = typeof record.msg === 'string' ? record.msg : '';
  return [time, level.padEnd(5), msg, ...fields].filter((s) => s !== '').join(' ');
}

/** A pino destination writing each record as prettyLine to `fd`. */
export function prettyDestination(fd = 2): { write(chunk: string): void } {
  return {
    write(chunk) {
      for (const line of chunk.split('\n')) if (line !== '') writeSync(fd, `${prettyLine(line)}\n`);
    },
  };
}
