// Logs go to stderr (fd 2): stdout belongs to the protocol when serving over stdio.
// Steer text is never logged at info level; it may be private to the host's user.
// No log line carries a stack trace: an error is logged by type, message and code only, so a
// log shipped elsewhere cannot leak file paths or the shape of the code (the message is enough
// to find the throw site in a test).
import { pino, type Logger } from 'pino';

export type { Logger };

function errorWithoutStack(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const code: unknown = 'code' in err ? err.code : undefined;
  return { type: err.name, message: err.message, ...(code !== undefined ? { code } : {}) };
}

export const LOG_SERIALIZERS = { err: errorWithoutStack, error: errorWithoutStack } as const;

export function createLogger(level: string = process.env.SUBRUN_LOG_LEVEL ?? 'warn'): Logger {
  return pino({ name: 'subrun', level, serializers: LOG_SERIALIZERS }, pino.destination({ fd: 2, sync: true }));
}

export const silentLogger: Logger = pino({ level: 'silent' });
