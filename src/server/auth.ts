// The server token, however a request carries it: `Authorization: Bearer T` (or `?token=T` on a
// WebSocket upgrade), or, from the dashboard's browser, the cookie set by `GET /ui/?token=T`. The
// cookie holds a value derived from the token (never the token itself) and is compared, like the
// token, in constant time.
import { hash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

export const AUTH_COOKIE = 'subrun_auth';

/** SHA-256 by crypto.hash (one-shot: half the cost of a Hash object; every request checks its token). */
export const digest = (s: string): Buffer => hash('sha256', s, 'buffer');

/** The cookie's value for a token: a digest, so the cookie store never holds the token. */
export function cookieValue(token: string): string {
  return digest(`subrun-cookie:${token}`).toString('base64url');
}

/** The request target as a URL; undefined if it does not parse (e.g. `//[`): never a throw. */
export function targetOf(req: IncomingMessage): URL | undefined {
  try {
    return new URL(req.url ?? '/', 'http://localhost');
  } catch {
    return undefined;
  }
}

const BEARER = /^bearer\s+/i;

/** Whether `auth` begins `Bearer ` in any case, with a plain space: how clients write it. */
function plainBearer(auth: string): boolean {
  if (auth.length < 7 || auth.charCodeAt(6) !== 32 /* ' ' */) return false;
  // Each letter's code with the lower-case bit set: `B` and `b` alike.
  return (
    (auth.charCodeAt(0) | 32) === 98 &&
    (auth.charCodeAt(1) | 32) === 101 &&
    (auth.charCodeAt(2) | 32) === 97 &&
    (auth.charCodeAt(3) | 32) === 114 &&
    (auth.charCodeAt(4) | 32) === 101 &&
    (auth.charCodeAt(5) | 32) === 114
  );
}

/** The bearer token of `Authorization: Bearer T`: T, trimmed (the scheme in any case, then whitespace). */
export function bearerOfHeader(auth: string): string | undefined {
  // The common header is read without a match object; trim() takes any further whitespace, as
  // the pattern's `\s+` would have (every request reads it: bench: http.steer.p50@1conn).
  if (plainBearer(auth)) return auth.slice(7).trim();
  const scheme = BEARER.exec(auth);
  return scheme === null ? undefined : auth.slice(scheme[0].length).trim();
}

export function bearerOf(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  return typeof auth === 'string' ? bearerOfHeader(auth) : undefined;
}

/** The value of one cookie of the request, if present. */
export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Whether two strings are equal, in time that depends on their lengths only (as timingSafeEqual
 * on their bytes, which the length check before it leaked too): every unit is compared, with no
 * early exit and no buffer made per request (bench: http.steer.p50@1conn).
 */
export function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** Checks a request's credentials against the token (its digest, `expected`). */
export class TokenCheck {
  readonly #expected: Buffer;
  readonly #cookie: Buffer;
  /**
   * The bearer each keep-alive connection last proved, so its next request with the very same
   * header is let in without another digest (bench: http.steer). Only a connection that already
   * presented the right token has an entry; a request is compared, in constant time, with its own
   * connection's proven value.
   */
  readonly #proven = new WeakMap<object, string>();

  constructor(token: string) {
    this.#expected = digest(token);
    this.#cookie = digest(cookieValue(token));
  }

  token(given: string | undefined): boolean {
    return given !== undefined && timingSafeEqual(digest(given), this.#expected);
  }

  /**
   * How the request is authenticated: `bearer` (the header, or `?token=` where `query` allows
   * it), `cookie`, or undefined. A request that presents a wrong bearer is not let in by a cookie.
   */
  of(req: IncomingMessage, query = false): 'bearer' | 'cookie' | undefined {
    const bearer = bearerOf(req) ?? (query ? (targetOf(req)?.searchParams.get('token') ?? undefined) : undefined);
    if (bearer !== undefined) {
      // In constant time too: a proxy that pools several clients onto one upstream connection
      // would otherwise let one compare its guess against what another proved.
      const proven = this.#proven.get(req.socket);
      if (proven !== undefined && sameText(proven, bearer)) return 'bearer';
      if (!this.token(bearer)) return undefined;
      this.#proven.set(req.socket, bearer);
      return 'bearer';
    }
    const cookie = cookieOf(req, AUTH_COOKIE);
    return cookie !== undefined && timingSafeEqual(digest(cookie), this.#cookie) ? 'cookie' : undefined;
  }
}
