// The JSON-RPC server: the shared server (src/server/hub.ts) plus the connections of JSON-RPC
// transports, each greeted with gateway.ready and given its session events in its slot.
import { PROTOCOL_VERSION } from '../contract/entities.ts';
import catalog from '../contract/catalog.json' with { type: 'json' };
import { ServerHub, type ServerOptions } from '../server/hub.ts';
import { METHODS as TABLE } from '../server/methods/table.ts';
import { SERVER_NAME, VERSION } from '../version.ts';
import { Connection, type RpcMethod } from './connection.ts';
import type { Transport } from './transports/transport.ts';

export { PROTOCOL_VERSION };

/** Every method the server answers, by name: the dispatch table as JSON-RPC reads it. */
export const METHODS: ReadonlyMap<string, RpcMethod> = new Map(Object.entries(TABLE));
export type { ServerOptions };
export type { EventSink } from '../server/hub.ts';

export const CATALOG: { readonly methods: readonly string[]; readonly events: readonly string[] } = catalog;

export class RpcServer extends ServerHub {
  readonly #connections = new Map<string, Connection>();
  #nextConnection = 0;

  constructor(options: ServerOptions = {}) {
    super(options);
    this.metrics?.addSources({
      connections: () => {
        let ws = 0;
        let stdio = 0;
        for (const c of this.#connections.values()) {
          if (c.kind === 'ws') ws++;
          else if (c.kind === 'stdio') stdio++;
        }
        return { ws, stdio };
      },
    });
  }

  get connectionCount(): number {
    return this.#connections.size;
  }

  /** Adopts a transport as a new connection and greets it with `gateway.ready`. */
  connect(transport: Transport): Connection {
    const id = `tr_${++this.#nextConnection}`;
    const logger = this.services.logger;
    const conn = new Connection(
      id,
      transport,
      METHODS,
      this.services,
      logger,
      () => {
        this.#connections.delete(id);
        this.removePeer(id);
      },
      this.limits,
    );
    this.#connections.set(id, conn);
    this.addPeer(id, { event: (_seq, _type, text) => conn.notifyEvent(text), close: () => undefined });
    logger.info({ transport: id }, 'connection opened');
    void conn.whenClosed.then(() => logger.info({ transport: id }, 'connection closed'));
    // The first frame, before any reply: hermes' client refuses a connection that starts with
    // anything else. It belongs to no session, so it has no session_id (not even null).
    conn.notify('event', {
      type: 'gateway.ready',
      seq: 0,
      ts: this.services.clock.now() / 1000,
      payload: {
        protocol_version: PROTOCOL_VERSION,
        replay_epoch: this.replay_epoch,
        server: { name: SERVER_NAME, version: VERSION },
        skin: {},
        change_events: false,
        heartbeat: true,
        recovered: { ...this.recovered },
      },
    });
    conn.start();
    return conn;
  }

  /** Shutdown, once every child's completion went out: every connection closes. */
  protected override closeTransports(): void {
    for (const conn of [...this.#connections.values()]) conn.close('server shutting down');
  }
}
