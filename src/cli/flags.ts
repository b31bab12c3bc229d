// Command-line flags with environment twins (a flag wins over its twin). A bad value is a
// UsageError with a one-line reason; the CLI prints it and exits 2.
import { closest } from '../suggest.ts';

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export type FlagKind = 'int' | 'string' | 'bool' | 'list';

export interface FlagSpec {
  readonly flag: string;
  /** Environment twin(s); the first one set wins (later ones are fallbacks, e.g. OPENAI_API_KEY). */
  readonly env?: string | readonly string[];
  readonly kind: FlagKind;
  /** Inclusive bounds for ints. */
  readonly min?: number;
  readonly max?: number;
  /** One line for --help: what it does and its default. */
  readonly help: string;
  /** The value's name in --help (`--port N`); by kind when omitted. */
  readonly arg?: string;
}

type ValueOf<K extends FlagKind> = K extends 'int' ? number : K extends 'bool' ? boolean : K extends 'list' ? string[] : string;

/** The parsed values of `S`, typed by each flag's kind (absent when neither flag nor twin was given). */
export type FlagValues<S extends readonly FlagSpec[]> = { readonly [F in S[number] as F['flag']]?: ValueOf<F['kind']> };

/** True when argv asks for help (`--help` or `-h` anywhere). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/** The --help text of a command: its usage lines, then one line per option with its twin. */
export function helpText(usage: string, specs: readonly FlagSpec[]): string {
  const rows = specs.map((s) => {
    const arg = s.kind === 'bool' ? '' : ` ${s.arg ?? (s.kind === 'int' ? 'N' : s.kind === 'list' ? 'A[,B]' : 'S')}`;
    const env = s.env === undefined ? '' : ` (${typeof s.env === 'string' ? s.env : s.env.join(', then ')})`;
    return [`--${s.flag}${arg}`, `${s.help}${env}`] as const;
  });
  const width = Math.min(32, Math.max(...rows.map(([f]) => f.length)) + 2);
  const lines = rows.map(([f, h]) => (f.length + 2 > width ? `  ${f}\n  ${' '.repeat(width)}${h}` : `  ${f.padEnd(width)}${h}`));
  return `${usage.trimEnd()}\n\noptions (environment twin in parentheses; a flag wins over its twin):\n${lines.join('\n')}\n  --help${' '.repeat(Math.max(2, width - 6))}this text\n`;
}

/** Every value one flag was given, in order, and the last (what a single-valued kind takes). */
interface Given {
  readonly all: readonly string[];
  readonly last: string;
}

/** Parses `argv` against `specs`; returns values keyed by flag name (without dashes) and positionals. */
export function parseFlags<const S extends readonly FlagSpec[]>(
  argv: readonly string[],
  specs: S,
  env: NodeJS.ProcessEnv = process.env,
): { values: FlagValues<S>; positionals: string[]; sources: Record<string, string> } {
  const byFlag = new Map(specs.map((s) => [s.flag, s]));
  const raw = new Map<string, Given>();
  const positionals: string[] = [];
  // One iterator: a flag written `--name value` takes the next argument off it.
  const args = argv[Symbol.iterator]();
  for (let step = args.next(); step.done !== true; step = args.next()) {
    const arg = step.value;
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    const spec = byFlag.get(name);
    if (!spec) {
      const near = closest(
        name,
        specs.map((s) => s.flag),
      );
      throw new UsageError(`unknown option --${name}${near === undefined ? '' : `; did you mean --${near}?`}`);
    }
    let value: string;
    if (spec.kind === 'bool' && eq < 0) value = 'true';
    else if (eq >= 0) value = arg.slice(eq + 1);
    else {
      const next = args.next();
      if (next.done === true) throw new UsageError(`--${name} needs a value`);
      value = next.value;
    }
    raw.set(name, { all: [...(raw.get(name)?.all ?? []), value], last: value });
  }
  const values: Record<string, number | string | boolean | string[]> = {};
  /** Where each value came from: `--flag` or the environment variable's name. */
  const sources: Record<string, string> = {};
  for (const spec of specs) {
    const fromFlag = raw.get(spec.flag);
    const envNames = spec.env === undefined ? [] : typeof spec.env === 'string' ? [spec.env] : spec.env;
    const envName = envNames.find((n) => env[n] !== undefined && env[n] !== '');
    const fromEnv = envName !== undefined ? env[envName] : undefined;
    const source = fromFlag ? `--${spec.flag}` : envName;
    const given = fromFlag ?? (fromEnv !== undefined && fromEnv !== '' ? { all: [fromEnv], last: fromEnv } : undefined);
    if (!given) continue;
    values[spec.flag] = convert(spec, given, source ?? spec.flag);
    sources[spec.flag] = source ?? spec.flag;
  }
  // Converted by its spec's kind, as FlagValues<S> says; the compiler cannot tie a runtime spec to its key.
  return { values: values as FlagValues<S>, positionals, sources };
}

function convert(spec: FlagSpec, given: Given, source: string): number | string | boolean | string[] {
  const { all: texts, last } = given;
  switch (spec.kind) {
    case 'bool':
      if (!/^(true|false|1|0)$/.test(last)) throw new UsageError(`${source} must be true or false, got ${JSON.stringify(last)}`);
      return last === 'true' || last === '1';
    case 'string':
      if (last === '') throw new UsageError(`${source} must not be empty`);
      return last;
    case 'list':
      return texts
        .flatMap((t) => t.split(','))
        .map((s) => s.trim())
        .filter((s) => s !== '');
    case 'int': {
      const min = spec.min ?? 0;
      const max = spec.max ?? Number.MAX_SAFE_INTEGER;
      if (!/^\d+$/.test(last) || Number(last) < min || Number(last) > max) {
        throw new UsageError(`${source} must be an integer from ${min} to ${max}, got ${JSON.stringify(last)}`);
      }
      return Number(last);
    }
  }
}
