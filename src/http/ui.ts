// The dashboard's files under /ui/, and the browser's login: `GET /ui/?token=T` sets the auth
// cookie (HttpOnly, SameSite=Strict, Path=/) and redirects to `/ui/`, so the token leaves the
// address bar (and the history). Every answer under /ui/ carries a Content-Security-Policy that
// allows this origin only. The files need no authentication: they hold no data, the API does.
import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AUTH_COOKIE, cookieValue, type TokenCheck } from '../server/auth.ts';
import { RpcCode } from '../server/errors.ts';
import { HttpCode, httpError, notFound, send, type Answer } from './respond.ts';
import type { Target } from './route-table.ts';
import { withProps } from '../shapes.ts';

/** Where the dashboard's files are, from src/http/ and from the build's dist/http/ alike. */
export const DEFAULT_UI_DIR = fileURLToPath(new URL('../../src/http/ui/', import.meta.url));

export const CSP = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

const UI_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
};

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
};

export class UiFiles {
  readonly #root: string;
  readonly #check: TokenCheck;
  readonly #token: string;

  constructor(root: string, token: string, check: TokenCheck) {
    this.#root = resolve(root);
    this.#token = token;
    this.#check = check;
  }

  /** True if the dashboard's directory is there (capabilities says so). */
  async present(): Promise<boolean> {
    return (await stat(this.#root).catch(() => undefined))?.isDirectory() === true;
  }

  async serve(req: IncomingMessage, res: ServerResponse, url: Target, closing: boolean): Promise<void> {
    const reply = (a: Answer) => send(res, withProps(a, { headers: { ...UI_HEADERS, ...a.headers } }), closing);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      reply(withProps(httpError(RpcCode.MethodNotFound, 'method not allowed', { Allow: 'GET, HEAD' }), { status: 405 }));
      return;
    }
    if (url.pathname === '/ui') {
      reply({ status: 308, body: {}, headers: { Location: '/ui/' } });
      return;
    }
    const token = url.searchParams.get('token');
    if (token !== null) {
      if (!this.#check.token(token)) {
        // A person who pasted a wrong link sees the page, which asks for the token again (it
        // finds `?token=` still in its address: a right one never stays); a script gets the JSON.
        if (wantsPage(req)) await this.#send(req, res, join(this.#root, 'index.html'), closing, 401);
        else reply(httpError(HttpCode.Unauthorized, 'unauthorized', { 'WWW-Authenticate': 'Bearer' }));
        return;
      }
      // 303: the browser follows with a GET of the clean address; the fragment (#session=…) stays.
      reply({
        status: 303,
        body: {},
        headers: { Location: '/ui/', 'Set-Cookie': `${AUTH_COOKIE}=${cookieValue(this.#token)}; HttpOnly; SameSite=Strict; Path=/` },
      });
      return;
    }
    const file = this.#file(url.pathname.slice('/ui/'.length));
    if (file === undefined) {
      reply(notFound());
      return;
    }
    let path = file;
    let info = await stat(path).catch(() => undefined);
    if (info?.isDirectory()) {
      path = join(path, 'index.html');
      info = await stat(path).catch(() => undefined);
    }
    if (!info?.isFile()) {
      reply(notFound());
      return;
    }
    await this.#send(req, res, path, closing, 200);
  }

  async #send(req: IncomingMessage, res: ServerResponse, path: string, closing: boolean, status: number): Promise<void> {
    const data = await readFile(path);
    if (res.headersSent || res.destroyed) return;
    res.writeHead(
      status,
      withProps(UI_HEADERS, {
        'Content-Type': TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream',
        'Content-Length': data.length,
        'Cache-Control': 'no-cache',
        ...(status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {}),
        ...(closing ? { Connection: 'close' } : {}),
      }),
    );
    res.end(req.method === 'HEAD' ? undefined : data);
  }

  /** The file a /ui/ path names, never outside the root (no `..`, no NUL, no backslash). */
  #file(rest: string): string | undefined {
    let decoded: string;
    try {
      decoded = decodeURIComponent(rest);
    } catch {
      return undefined;
    }
    if (decoded.includes('\0') || decoded.includes('\\') || decoded.split('/').some((s) => s === '..')) return undefined;
    const path = resolve(this.#root, decoded);
    return path === this.#root || path.startsWith(this.#root + sep) ? path : undefined;
  }
}

/** A browser's navigation (it asks for HTML), not a script's request. */
function wantsPage(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.includes('text/html');
}
