// The cases, in the order.
import type { BenchCase } from '../lib/case.ts';
import { delegationCase } from './delegation.ts';
import { durabilityCase } from './durability.ts';
import { fanoutCase } from './fanout.ts';
import { httpCase } from './http.ts';
import { mcpCase } from './mcp.ts';
import { otelCase } from './otel.ts';
import { registryCase } from './registry.ts';
import { scaleOutCase } from './scale-out.ts';
import { remoteRestartCase } from './remote-restart.ts';
import { rpcStdioCase } from './rpc-stdio.ts';
import { rpcWsCase } from './rpc-ws.ts';
import { sessionChurnCase } from './session-churn.ts';
import { slowConsumerCase } from './slow-consumer.ts';
import { startupCase } from './startup.ts';
import { steerLoadCase } from './steer-load.ts';
import { tailMemoryCase } from './tail-memory.ts';

export const CASES: readonly BenchCase[] = [
  registryCase,
  tailMemoryCase,
  rpcStdioCase,
  rpcWsCase,
  fanoutCase,
  delegationCase,
  steerLoadCase,
  slowConsumerCase,
  sessionChurnCase,
  startupCase,
  httpCase,
  scaleOutCase,
  durabilityCase,
  remoteRestartCase,
  mcpCase,
  otelCase,
];

export function findCase(name: string): BenchCase | undefined {
  return CASES.find((c) => c.name === name);
}
