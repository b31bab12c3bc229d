// The dispatch table: every method the server answers, by name, each typed by its schema.
import type { MethodName } from '../../contract/methods.ts';
import type { MethodDef } from './define.ts';
import { delegationMethods } from './delegation.ts';
import { parentMethods } from './parent.ts';
import { serverMethods } from './server.ts';
import { sessionMethods } from './session.ts';
import { spawnTreeMethods } from './spawn-tree.ts';
import { subagentMethods } from './subagent.ts';

export { settle } from './define.ts';
export type { AnswerOf, HandledOf, MethodDef, SettledOf, SteerAnswer, WireAnswerOf } from './define.ts';

/** Method name -> its definition; the type holds the table complete and each entry to its own name. */
export const METHODS: { readonly [M in MethodName]: MethodDef<M> } = {
  ...serverMethods,
  ...sessionMethods,
  ...delegationMethods,
  ...subagentMethods,
  ...parentMethods,
  ...spawnTreeMethods,
};
