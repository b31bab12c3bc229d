// Objects of one shape. Node 20's V8, in optimized code, gives each object that an object literal
// beginning with a spread and then adding a key (`{ ...base, key: value }`) makes a map of its own:
// the clone's map records no transition for the added key. No inline cache then sees one shape
// twice: every read of such an object is a megamorphic lookup, every for-in over it builds its
// keys anew, and each one leaves a map behind for the collector. A steer's params made so cost its
// HTTP route 9 µs of its 107 at one connection (bench: http.steer.p50@1conn; docs/benchmarks.md).
// `Object.assign` onto a fresh `{}` takes the same transitions every time. A literal whose spread
// comes after a key of its own (`{ type, ...rest }`) is not affected, nor is one that only
// overrides keys the spread brought. test/package/spread-shapes.test.ts keeps src/ to this.

/**
 * `{ ...base, ...extra }`: `extra`'s keys win; a missing base (undefined, or null from a plain-JS
 * caller) is `{ ...extra }`, as a spread of it is. A `base` with an own `__proto__` key (JSON.parse
 * makes one) is spread instead, so it stays an own key and never sets the copy's prototype. The
 * result is not typed from where it goes, so `extra`'s keys are not checked against that type as
 * a literal's would be: name them with care, or give `extra` a `satisfies`.
 */
export function withProps<A extends object, B extends object>(base: A | null | undefined, extra: B): NoInfer<Omit<A, keyof B> & B> {
  if (base !== undefined && base !== null && Object.hasOwn(base, '__proto__')) return { ...base, ...extra };
  return Object.assign({}, base, extra);
}
