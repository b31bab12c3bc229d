// The session key each connection last proved, so an HTTP host steering over one keep-alive
// connection pays the key's SHA-256 once, not on every request (bench: http.steer).
import { timingSafeEqual } from 'node:crypto';

interface Proof {
  /** The session proved, by object: a closed session's id never matches a later one by accident. */
  readonly session: object;
  readonly key: Buffer;
}

export class KeyProofs {
  /** Weak: a connection's proof goes with its socket. */
  readonly #proven = new WeakMap<object, Proof>();

  /**
   * True if `by` already proved `key` for `session`. Compared in constant time: a proxy that pools
   * several clients onto one upstream connection would otherwise let one compare its guess
   * against what another proved (as TokenCheck does for the server token).
   */
  proved(by: object, session: object, key: string): boolean {
    const p = this.#proven.get(by);
    if (p?.session !== session) return false;
    const given = Buffer.from(key, 'utf8');
    return given.length === p.key.length && timingSafeEqual(given, p.key);
  }

  /** `by` proved `key` for `session` (its digest matched). One proof per connection: the latest. */
  remember(by: object, session: object, key: string): void {
    this.#proven.set(by, { session, key: Buffer.from(key, 'utf8') });
  }
}
