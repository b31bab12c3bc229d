// The argument checks shared by methods, in the protocol's order: a required id or list (4000),
// steer text (4002/4003), then session authority (4001).
import { Buffer } from 'node:buffer';
import { MAX_STEER_BYTES } from '../../registry/registry.ts';
import { RpcCode, RpcError } from '../errors.ts';

export function requireId(value: unknown, name: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw new RpcError(RpcCode.IdRequired, `${name} required`);
  return value;
}

/** The trimmed steer text, or 4002/4003. */
export function requireSteerText(value: unknown): string {
  const text = typeof value === 'string' ? value.trim() : '';
  if (text === '') throw new RpcError(RpcCode.TextRequired, 'text is required');
  if (Buffer.byteLength(text, 'utf8') > MAX_STEER_BYTES) throw new RpcError(RpcCode.TextTooLong, 'text too long');
  return text;
}
