// Bounded waits of the shutdown: each step gets the grace, and a step past it is cut, not awaited.

/** Resolves with whether `p` settled within `ms`. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const r = await Promise.race([p.then(() => true), deadline]);
  clearTimeout(timer);
  return r;
}
