// What a child's runner reports while it runs (RunnerContext.telemetry): its model requests and
// tool calls, as spans and metrics, never their content. Part of the runner contract (types.ts).
import type { Context } from '@opentelemetry/api';

/** How one model request ended. */
export type ChatEnd =
  | {
      readonly outcome: 'ok';
      readonly response_model?: string;
      readonly response_id?: string;
      readonly finish_reason: string | null;
      readonly input_tokens: number;
      readonly output_tokens: number;
    }
  | { readonly outcome: 'error'; readonly error_type: string }
  | { readonly outcome: 'cancelled' };

export interface ChatRequest {
  readonly model: string;
  /** The model server's base URL: its host and port name the span's server. */
  readonly base_url: string;
}

export interface Ending<T> {
  end(result: T): void;
}

/** What a child's runner reports while it runs (RunnerContext.telemetry): spans and metrics, never content. */
export interface RunTelemetry {
  /** One request to the model server (retries inside it included). */
  chat(request: ChatRequest): Ending<ChatEnd>;
  /** One tool call: `ok` false for a tool that failed. */
  tool(name: string, call_id?: string): Ending<boolean>;
  /** Writes the child's trace context (W3C `traceparent`, `tracestate`) into `carrier`. */
  inject(carrier: Record<string, string>): void;
  /** The context a spawn made by this child now hangs under (its open tool span, else its own). */
  spawnContext(): Context | undefined;
  /**
   * The child runs on a worker (serve --nats): its span names it (`subrun.worker.id`) and who
   * the worker's runner talks to (`gen_ai.provider.name`).
   */
  placed(worker: string, provider: string): void;
}
