// --log-level and --log-format, shared by `serve` and `worker`: one spec, one check, one logger.
import { createLogger, LOG_FORMATS, type LogFormat, type Logger } from '../log.ts';
import { UsageError, type FlagSpec } from './flags.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const LOG_FLAGS = [
  {
    flag: 'log-level',
    env: 'SUBRUN_LOG_LEVEL',
    kind: 'string',
    arg: 'L',
    help: 'pino level on stderr: fatal, error, warn, info, debug, trace, silent (default warn)',
  },
  {
    flag: 'log-format',
    env: 'SUBRUN_LOG_FORMAT',
    kind: 'string',
    arg: 'F',
    help: "json (pino's lines, for a log shipper; the default) or pretty (one readable line each)",
  },
] as const satisfies readonly FlagSpec[];

function isFormat(value: string): value is LogFormat {
  return LOG_FORMATS.some((f) => f === value);
}

/** The logger the flags ask for; a bad level or format is a UsageError naming the choices. */
export function loggerFromFlags(v: { readonly 'log-level'?: string; readonly 'log-format'?: string }): Logger {
  const level = v['log-level'] ?? 'warn';
  if (!LOG_LEVELS.includes(level)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  const format = v['log-format'] ?? 'json';
  if (!isFormat(format)) throw new UsageError(`--log-format must be json or pretty, got ${JSON.stringify(format)}`);
  return createLogger(level, format);
}
