// A worker's spans for one child: its model requests and tool calls, parented on the child's
// `invoke_agent` context that the assignment's headers carried (the control plane's span), and
// exported by the worker's own SDK. No context in the assignment: no spans (there is no tree to
// join). A worker without an SDK records nothing and forwards the context it got verbatim.
import { parentFrom } from '../../telemetry/context.ts';
import { NO_RUN } from '../../telemetry/observer.ts';
import { Traces } from '../../telemetry/traces.ts';
import type { RunTelemetry } from '../../types.ts';
import { withProps } from '../../shapes.ts';

export function workerTelemetry(assigned: Readonly<Record<string, string>>): RunTelemetry {
  const parent = parentFrom(assigned);
  const run = parent ? Traces.runUnder(parent) : NO_RUN;
  return withProps(run, {
    inject(carrier) {
      run.inject(carrier);
      // Nothing of its own to say (no SDK, no propagator): the assignment's context goes on as it came.
      if (carrier.traceparent === undefined) Object.assign(carrier, assigned);
    },
  } satisfies Partial<RunTelemetry>);
}
