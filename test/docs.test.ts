// Every JSON example in docs/delegation.md must parse and match the schema its fence names
// (```json entry, ```json snapshot, ...), so the docs cannot drift from what the code produces.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { completionEntrySchema, interruptResultSchema, parseBusEvent, snapshotSchema, steerResultSchema, tailResultSchema } from '../src/contract/wire.ts';

const SCHEMAS: Record<string, (value: unknown) => unknown> = {
  entry: (v) => completionEntrySchema.parse(v),
  snapshot: (v) => snapshotSchema.parse(v),
  steer: (v) => steerResultSchema.parse(v),
  tail: (v) => tailResultSchema.parse(v),
  interrupt: (v) => interruptResultSchema.parse(v),
  event: (v) => parseBusEvent(v),
};

function jsonBlocks(markdown: string): Array<{ kind: string; body: string; line: number }> {
  const blocks: Array<{ kind: string; body: string; line: number }> = [];
  const re = /^```json([^\n]*)\n([\s\S]*?)^```/gm;
  for (const m of markdown.matchAll(re)) {
    blocks.push({ kind: (m[1] ?? '').trim(), body: m[2] ?? '', line: markdown.slice(0, m.index).split('\n').length });
  }
  return blocks;
}

const doc = readFileSync(new URL('../docs/delegation.md', import.meta.url), 'utf8');
const blocks = jsonBlocks(doc);

describe('docs/delegation.md JSON examples', () => {
  it('has examples of every kind', () => {
    expect(new Set(blocks.map((b) => b.kind))).toEqual(new Set(Object.keys(SCHEMAS)));
  });

  it.each(blocks.map((b) => [`line ${b.line} (${b.kind || 'unnamed'})`, b] as const))('%s parses against its schema', (_name, block) => {
    const check = SCHEMAS[block.kind];
    expect(check, `the fence at line ${block.line} must name a schema: ${Object.keys(SCHEMAS).join(', ')}`).toBeDefined();
    const value: unknown = JSON.parse(block.body);
    expect(() => check?.(value)).not.toThrow();
  });

  it('rejects an example that drifts from the schema (the check can fail)', () => {
    const drifted = { ...JSON.parse(blocks.find((b) => b.kind === 'entry')?.body ?? '{}'), delivered: true };
    expect(() => SCHEMAS.entry?.(drifted)).toThrow();
    const noIdentity = { type: 'subagent.text', ts: 1, src: 'x', text: 'hi' };
    expect(() => parseBusEvent(noIdentity)).toThrow();
  });
});
