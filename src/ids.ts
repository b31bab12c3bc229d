// Id makers behind a small interface, so tests can inject deterministic ids.
import { customAlphabet } from 'nanoid';

export interface IdMaker {
  subagent(): string;
  delegation(): string;
  steer(): string;
  session(): string;
}

// Lower-case alphanumerics: ids stay readable in a terminal and safe in URLs and file names.
const random = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 12);

export const randomIds: IdMaker = {
  subagent: () => `sa_${random()}`,
  delegation: () => `dg_${random()}`,
  steer: () => `st_${random()}`,
  session: () => `ses_${random()}`,
};

/** Deterministic ids (`sa_1`, `sa_2`, ...) for tests and reproducible demos. */
export function counterIds(): IdMaker {
  let n = 0;
  return {
    subagent: () => `sa_${++n}`,
    delegation: () => `dg_${++n}`,
    steer: () => `st_${++n}`,
    session: () => `ses_${++n}`,
  };
}
