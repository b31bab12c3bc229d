// Logs go to stderr (fd 2): stdout belongs to the protocol when serving over stdio.
// Steer text is never logged at info level; it may be private to the host's user.
// No log line carries a stack trace: an error is logged by type, message and code only, so a
// log shipped elsewhere cannot leak file paths or the shape of the code (the message is enough
// to find the throw site in a test).
import { pino, type Logger } from 'pino';
import { prettyDestination } from './log-pretty.ts';

export type { Logger };

function errorWithoutStack(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const code: unknown = 'code' in err ? err.code : undefined;
  return { type: err.name, message: err.message, ...(code !== undefined ? { code } : {}) };
}

export const LOG_SERIALIZERS = { err: errorWithoutStack, error: errorWithoutStack } as const;

/** `json`: pino's lines as they are (for a log shipper); `pretty`: one readable line each (log-pretty.ts). */
export type LogFormat = 'json' | 'pretty';
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];

/** The logger the server and the CLI use: on stderr, at `level`, with no stack in any line. */
export function createLogger(level: string = process.env.SUBRUN_LOG_LEVEL ?? 'warn', format: LogFormat = 'json'): Logger {
  const destination = format === 'pretty' ? prettyDestination(2) : pino.destination({ fd: 2, sync: true });
  return pino({ name: 'subrun', level, serializers: LOG_SERIALIZERS }, destination);
}

export const silentLogger: Logger = pino({ level: 'silent' });
