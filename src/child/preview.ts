// One line of text for a tool's arguments or result, shown in the transcript and in tool events.
// The value comes from a runner or a model and may be anything: nested thousands deep, cyclic,
// huge, with getters or a Proxy that throws. JSON.stringify recurses without bound (a stack
// overflow at ~5,000 levels) and serialises everything before it could be cut, so the preview is
// written here instead, JSON-shaped, with a depth and a length bound, and it never throws.

/** Characters a preview may take; a longer one ends with `…`. */
export const PREVIEW_CHARS = 200;
/** Levels of nesting written out; deeper containers show as `[…]` / `{…}`. */
export const PREVIEW_DEPTH = 8;

/** A bounded, JSON-like rendering of `value`; a string is shown as it is. Never throws. */
export function preview(value: unknown, max: number = PREVIEW_CHARS): string {
  if (value === undefined) return '';
  let s: string;
  try {
    s = typeof value === 'string' ? value.slice(0, max + 1) : new Writer(max).value(value, 0).text;
  } catch {
    s = '[unprintable]';
  }
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

class Writer {
  text = '';
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  /** True once the text is past the bound: the rest would be cut anyway. */
  get #full(): boolean {
    return this.text.length > this.#max;
  }

  value(v: unknown, depth: number): this {
    if (this.#full) return this;
    switch (typeof v) {
      case 'string':
        // Only what can show is quoted: a 100 MB string costs no more than a short one.
        this.text += JSON.stringify(v.slice(0, this.#max + 1));
        return this;
      case 'number':
        this.text += Number.isFinite(v) ? String(v) : 'null';
        return this;
      case 'boolean':
        this.text += String(v);
        return this;
      case 'bigint':
        this.text += `${v}n`;
        return this;
      case 'object':
        if (v === null) {
          this.text += 'null';
          return this;
        }
        return Array.isArray(v) ? this.#array(v, depth) : this.#object(v as Record<string, unknown>, depth);
      default:
        // undefined, functions and symbols: JSON has no spelling for them.
        this.text += 'null';
        return this;
    }
  }

  #array(a: readonly unknown[], depth: number): this {
    if (depth >= PREVIEW_DEPTH) {
      this.text += '[…]';
      return this;
    }
    this.text += '[';
    for (let i = 0; i < a.length && !this.#full; i++) {
      if (i > 0) this.text += ',';
      this.value(a[i], depth + 1);
    }
    this.text += ']';
    return this;
  }

  #object(o: Record<string, unknown>, depth: number): this {
    if (depth >= PREVIEW_DEPTH) {
      this.text += '{…}';
      return this;
    }
    // As JSON.stringify does (a Date shows as its ISO string); one level deeper, so a toJSON
    // that keeps returning new objects meets the depth bound too.
    const toJSON = o.toJSON;
    if (typeof toJSON === 'function') {
      const replaced: unknown = toJSON.call(o);
      if (replaced !== o) return this.value(replaced, depth + 1);
    }
    this.text += '{';
    let first = true;
    for (const key in o) {
      if (this.#full) break;
      if (!Object.hasOwn(o, key)) continue;
      const v = o[key];
      if (v === undefined || typeof v === 'function' || typeof v === 'symbol') continue;
      if (!first) this.text += ',';
      first = false;
      this.text += `${JSON.stringify(key.slice(0, this.#max + 1))}:`;
      this.value(v, depth + 1);
    }
    this.text += '}';
    return this;
  }
}
