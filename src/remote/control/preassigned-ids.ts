// The ids of a spawn a worker answered synchronously (its delegate() returns ids at once): the
// control plane makes that one spawn with them, and its own ids otherwise.
import { randomIds, type IdMaker } from '../../ids.ts';

/** Ids a worker made for a spawn it answered synchronously; used for that one spawn. */
export class PreassignedIds implements IdMaker {
  #delegation: string | undefined;
  #subagents: string[] = [];

  constructor(private readonly base: IdMaker = randomIds) {}

  subagent(): string {
    return this.#subagents.shift() ?? this.base.subagent();
  }
  delegation(): string {
    const id = this.#delegation;
    this.#delegation = undefined;
    return id ?? this.base.delegation();
  }
  steer(): string {
    return this.base.steer();
  }
  session(): string {
    return this.base.session();
  }

  preassigned<T>(delegation_id: string, subagent_ids: readonly string[], fn: () => T): T {
    // Only ids of our own shape: a worker cannot name a child into another's namespace.
    const ok = /^dg_[0-9a-z]{12}$/.test(delegation_id) && subagent_ids.every((id) => /^sa_[0-9a-z]{12}$/.test(id));
    if (ok) {
      this.#delegation = delegation_id;
      this.#subagents = [...subagent_ids];
    }
    try {
      return fn();
    } finally {
      this.#delegation = undefined;
      this.#subagents = [];
    }
  }
}
