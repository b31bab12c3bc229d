// Runner kinds: how a plain-JSON agent spec (`{kind, ...}`) becomes a Runner. The wire names
// runners this way; library users may register their own kinds.
import type { z } from 'zod';
import type { Runner } from '../../types.ts';
import { playing, scriptedAgentSchema } from './scripted.ts';

export interface RunnerKind {
  /** Validates the whole agent spec, `kind` included. */
  readonly schema: z.ZodType;
  /** Called only with a value `schema` accepted. */
  create(spec: unknown): Runner;
}

export type RunnerKinds = Readonly<Record<string, RunnerKind>>;

/** Pairs a schema with a factory typed by it. */
export function defineRunnerKind<S extends z.ZodType>(schema: S, create: (spec: z.output<S>) => Runner): RunnerKind {
  return { schema, create: (spec) => create(spec as z.output<S>) };
}

export const builtinRunnerKinds: RunnerKinds = {
  scripted: defineRunnerKind(scriptedAgentSchema, (spec) => playing(spec.steps)),
};
