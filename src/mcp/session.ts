// One MCP session = one subrun session, made by this session's own link to the RPC server (an
// in-memory connection, as ACP's), so it alone is attached to it: every tool is a JSON-RPC call on
// that link, with the server's authority, generations, limits, steer accounting and codes, and the
// only events that reach it are its own session's. It keeps what the translation needs and nothing
// the runtime decides: the listeners of its events and the last completion entries (for resource
// reads), bounded.
import type { CompletionEntry } from '../contract/entities.ts';
import type { Logger } from '../log.ts';
import { RpcLink, type RpcEvent } from '../rpc/link.ts';
import type { Transport } from '../rpc/transports/transport.ts';
import { entryFromWire } from '../server/wire-events.ts';

/** Completion entries kept for resource reads (a read of an older child asks delegation.result). */
const KEPT_ENTRIES = 1000;

export type EventListener = (event: RpcEvent) => void;

export class McpSession {
  readonly link: RpcLink;
  readonly id: string;
  readonly key: string;
  readonly generation: number;
  readonly #listeners: Set<EventListener>;
  readonly #entries: Map<string, CompletionEntry>;
  readonly #closers: Set<() => void>;
  #closing: Promise<void> | undefined;

  private constructor(
    link: RpcLink,
    info: { session_id: string; session_key: string; generation: number },
    state: { listeners: Set<EventListener>; entries: Map<string, CompletionEntry>; closers: Set<() => void> },
  ) {
    this.link = link;
    this.id = info.session_id;
    this.key = info.session_key;
    this.generation = info.generation;
    this.#listeners = state.listeners;
    this.#entries = state.entries;
    this.#closers = state.closers;
  }

  /** Opens the link and its subrun session (`mcp: <client name>`). */
  static async open(server: { connect(transport: Transport): unknown }, client: string, logger: Logger): Promise<McpSession> {
    const listeners = new Set<EventListener>();
    const entries = new Map<string, CompletionEntry>();
    const closers = new Set<() => void>();
    const onEvent = (e: RpcEvent) => {
      if (e.type === 'subagent.complete') {
        const entry = entryFromWire(e.payload);
        entries.set(entry.subagent_id, entry);
        if (entries.size > KEPT_ENTRIES) entries.delete(entries.keys().next().value ?? '');
      }
      for (const l of [...listeners]) {
        try {
          l(e);
        } catch (err) {
          logger.error({ err, type: e.type }, 'mcp event listener failed');
        }
      }
    };
    const link = new RpcLink(server, onEvent, () => {
      for (const c of [...closers]) c();
    });
    const info = await link.call('session.create', { title: `mcp: ${client}`.slice(0, 512) });
    return new McpSession(link, info, { listeners, entries, closers });
  }

  /** Runs `l` for each event of this session, in the server's order, until the returned function is called. */
  listen(l: EventListener): () => void {
    this.#listeners.add(l);
    return () => this.#listeners.delete(l);
  }

  /** Runs `c` once when the link is gone (the session ended, or the server shut down); at once if it is. */
  onClosed(c: () => void): () => void {
    if (this.link.closed) {
      c();
      return () => undefined;
    }
    this.#closers.add(c);
    return () => this.#closers.delete(c);
  }

  get closed(): boolean {
    return this.link.closed;
  }

  /** The completion entry of a child of this session that completed lately, if kept. */
  entryOf(subagent_id: string): CompletionEntry | undefined {
    return this.#entries.get(subagent_id);
  }

  /** Ends the subrun session (its live children interrupted, their completions sent), then the link. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (!this.link.closed) await this.link.call('session.close', { session_id: this.id }).catch(() => undefined);
      this.link.close();
    })();
    return this.#closing;
  }
}
