// `subrun watch --format pretty`: one line a person reads per wire event, typed by the event's
// type (the protocol's TypedWireEvent): `12:03:07 #14 sa_… tool read_file  {"path":"a"}`.
import type { TypedWireEvent } from '../contract/events.ts';

const WIDTH = 100;

function clip(text: string, width = WIDTH): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > width ? `${one.slice(0, width - 1)}…` : one;
}

const quoted = (text: string) => JSON.stringify(clip(text));

/** What the event says, after its time, seq and who. */
function detail(e: TypedWireEvent): string {
  switch (e.type) {
    case 'gateway.ready':
      return `connected (protocol ${e.payload.protocol_version}, ${e.payload.server.name} ${e.payload.server.version})`;
    case 'delegation.dispatched':
      return `${e.payload.delegation_id} dispatched ${e.payload.count} task${e.payload.count === 1 ? '' : 's'}`;
    case 'delegation.complete':
      return `${e.payload.delegation_id} complete: ${e.payload.results.map((r) => `${r.subagent_id} ${r.status}`).join(', ')}`;
    case 'subagent.spawn_requested':
      return `${e.payload.subagent_id} spawn requested (depth ${e.payload.depth}): ${quoted(e.payload.goal)}`;
    case 'subagent.start':
      return `${e.payload.subagent_id} started: ${quoted(e.payload.goal)}`;
    case 'subagent.thinking':
      return `${e.payload.subagent_id} thinks ${quoted(e.payload.text)}`;
    case 'subagent.text':
      return `${e.payload.subagent_id} says ${quoted(e.payload.text)}`;
    case 'subagent.tool':
      return `${e.payload.subagent_id} tool ${e.payload.tool_name} ${clip(e.payload.tool_preview)}`;
    case 'subagent.steer.delivered':
      return `${e.payload.subagent_id} took steer ${e.payload.steer_id} ${quoted(e.payload.text)}`;
    case 'subagent.complete': {
      const p = e.payload;
      const missed = p.missed_steer === undefined ? '' : ` missed_steer ${quoted(p.missed_steer)}`;
      const error = p.error === undefined ? '' : ` error ${quoted(p.error)}`;
      return `${p.subagent_id} ${p.status} (${p.exit_reason}, ${p.duration_seconds.toFixed(1)} s) ${quoted(p.summary)}${error}${missed}`;
    }
    case 'message.start':
      return 'parent turn started';
    case 'message.delta':
      return `parent says ${quoted(e.payload.text)}`;
    case 'message.thinking':
      return `parent thinks ${quoted(e.payload.text)}`;
    case 'message.complete':
      return `parent turn ${e.payload.status}: ${quoted(e.payload.text)}`;
    case 'tool.start':
      return `parent tool ${e.payload.name} ${clip(e.payload.preview)}`;
    case 'tool.complete':
      return `parent tool ${e.payload.name} ${e.payload.ok ? 'ok' : 'failed'} (${e.payload.duration_s.toFixed(1)} s)`;
    case 'session.steer.delivered':
      return `parent took steer ${e.payload.steer_id} ${quoted(e.payload.text)}`;
    case 'session.idle':
      return 'idle: no live children, every completion sent';
  }
}

/** `HH:MM:SS #seq type  what it says`. */
export function eventLine(e: TypedWireEvent): string {
  const time = new Date(e.ts * 1000).toISOString().slice(11, 19);
  return `${time} #${e.seq} ${e.type.padEnd(24)} ${detail(e)}`;
}
