// Logs go to stderr (fd 2): stdout belongs to the protocol when serving over stdio.
// Steer text is never logged at info level; it may be private to the host's user.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string = process.env.SUBRUN_LOG_LEVEL ?? 'warn'): Logger {
  return pino({ name: 'subrun', level }, pino.destination({ fd: 2, sync: true }));
}

export const silentLogger: Logger = pino({ level: 'silent' });
