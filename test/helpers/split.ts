// Splits a stream of text chunks on a separator in time linear in what arrives. The test clients
// once appended every chunk to one string and searched it from the start each time: a 9 MB event
// (burst.test.ts's delegation entry) in 64 KiB chunks was about 140 copies and scans of up to 9 MB,
// enough to hold the test's event loop for seconds on a loaded machine, so that a WebSocket the same
// test read looked to the server like a peer that had stopped reading, and was dropped.

/** Returns the function to feed chunks to; `onPiece` gets each text between separators, in order. */
export function splitOn(sep: string, onPiece: (piece: string) => void): (chunk: string) => void {
  if (sep.length === 0) throw new Error('splitOn: an empty separator');
  const keep = sep.length - 1;
  // The pending piece: `parts`, then `tail` (its last sep.length - 1 characters, where a separator
  // split across two chunks begins).
  let parts: string[] = [];
  let tail = '';
  return (chunk) => {
    const text = tail + chunk;
    let from = 0;
    for (let at = text.indexOf(sep); at >= 0; at = text.indexOf(sep, from)) {
      const piece = text.slice(from, at);
      onPiece(from === 0 && parts.length > 0 ? parts.join('') + piece : piece);
      if (from === 0) parts = [];
      from = at + sep.length;
    }
    const rest = text.slice(from);
    tail = keep > 0 ? rest.slice(Math.max(0, rest.length - keep)) : '';
    const whole = rest.slice(0, rest.length - tail.length);
    if (whole !== '') parts.push(whole);
  };
}

/** The same for bytes split on LF, each piece decoded as UTF-8 (an LF byte is never inside a character). */
export function splitLines(onLine: (line: string) => void): { push(chunk: Buffer): void; rest(): string | undefined } {
  let parts: Buffer[] = [];
  return {
    push(chunk) {
      let from = 0;
      for (let at = chunk.indexOf(0x0a); at >= 0; at = chunk.indexOf(0x0a, from)) {
        const piece = chunk.subarray(from, at);
        onLine((from === 0 && parts.length > 0 ? Buffer.concat([...parts, piece]) : piece).toString('utf8'));
        if (from === 0) parts = [];
        from = at + 1;
      }
      if (from < chunk.length) parts.push(chunk.subarray(from));
    },
    /** What came after the last LF, if anything. */
    rest: () => (parts.length > 0 ? Buffer.concat(parts).toString('utf8') : undefined),
  };
}
