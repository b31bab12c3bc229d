// Results a handler has already serialised, and a cache of serialised flat records: between two
// polls a child's snapshot rarely changes, and serialising it was the poll's cost (bench/cases/rpc-stdio.ts).

/**
 * JSON text a handler built itself. The connection splices it into the reply as is; anything
 * else that serialises it (JSON.stringify on an enclosing object) gets the same value through
 * toJSON, only slower.
 */
export class JsonText<T = unknown> {
  readonly text: string;
  /** The type of the value the text holds (types only: nothing is stored). */
  declare readonly value?: T;

  constructor(text: string) {
    this.text = text;
  }

  toJSON(): unknown {
    return JSON.parse(this.text);
  }

  /** The value the text holds (the handler that made it vouches for its type). */
  parse(): T {
    return JSON.parse(this.text) as T;
  }
}

interface Entry {
  readonly keys: string[];
  readonly values: unknown[];
  readonly text: string;
  used: number;
}

/**
 * Serialises flat records (plain data objects: no getters, no toJSON), each known by a string
 * field of its own (e.g. a child's id), reusing the text made for the same id last time when the
 * record has the same keys in the same order with the same values (===): then JSON.stringify would
 * write the same bytes. A record holding an object or a function is serialised afresh every time
 * (an object may have changed in place). Ids not seen in the last call are dropped once the cache
 * outgrows what is asked of it.
 */
export class FlatJsonCache {
  readonly #entries = new Map<string, Entry>();
  #turn = 0;

  /** `[r0,r1,...]` as JSON.stringify(records) would write it. */
  array(records: readonly Readonly<Record<string, unknown>>[], idField: string): string {
    const turn = ++this.#turn;
    let out = '[';
    let first = true;
    for (const record of records) {
      if (!first) out += ',';
      first = false;
      out += this.#text(record, idField, turn);
    }
    if (this.#entries.size > 2 * records.length + 32) this.#prune(turn);
    return `${out}]`;
  }

  get size(): number {
    return this.#entries.size;
  }

  #text(record: Readonly<Record<string, unknown>>, idField: string, turn: number): string {
    const key = record[idField];
    if (typeof key !== 'string') return JSON.stringify(record);
    const hit = this.#entries.get(key);
    if (hit !== undefined && same(hit, record)) {
      hit.used = turn;
      return hit.text;
    }
    const text = JSON.stringify(record);
    const keys: string[] = [];
    const values: unknown[] = [];
    for (const k in record) {
      const v = record[k];
      if ((typeof v === 'object' && v !== null) || typeof v === 'function') {
        this.#entries.delete(key);
        return text;
      }
      keys.push(k);
      values.push(v);
    }
    this.#entries.set(key, { keys, values, text, used: turn });
    return text;
  }

  #prune(turn: number): void {
    for (const [key, e] of this.#entries) if (e.used !== turn) this.#entries.delete(key);
  }
}

function same(e: Entry, record: Record<string, unknown>): boolean {
  const { keys, values } = e;
  let i = 0;
  for (const k in record) {
    if (keys[i] !== k || values[i] !== record[k]) return false;
    i++;
  }
  return i === keys.length;
}
