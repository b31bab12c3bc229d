// Retained memory as the memory cases read it.

/**
 * V8 heap + external memory after full GCs. Buffers' backing stores are freed by a background
 * sweeper after the GC that found them dead, so `external` can lag a collection: collect, yield to
 * the event loop, and repeat until two readings agree within 0.5% (at most 10 rounds).
 */
export async function measureMemory(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc (bench/run.ts does)');
  const read = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  let last = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 10; i++) {
    gc();
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const now = read();
    if (Math.abs(now - last) <= 0.005 * now) return now;
    last = now;
  }
  return last;
}
