// A transport moves whole messages (a stdio line, a WebSocket text frame) and nothing else; the
// connection above it never sees a socket or a stream.

export interface Transport {
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
