// A transport moves whole messages (a stdio line, a WebSocket text frame) and nothing else; the
// connection above it never sees a socket or a stream.

export interface Transport {
  /** What carries it, for the connections gauge; a transport of your own may leave it out. */
  readonly kind?: 'ws' | 'stdio';
  /** Sends one message. Must keep order; may drop the peer if it stops reading. */
  send(text: string): void;
  /** Closes the transport; onclose fires once. */
  close(reason?: string): void;
  /** Set by the connection before start(). */
  onmessage?: (text: string) => void;
  onclose?: () => void;
  /** Begins delivering messages. */
  start(): void;
}
