// Where a state directory is by default: XDG's state home, as `serve` and `store` agree.
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

/** `$XDG_STATE_HOME/subrun`, else `~/.local/state/subrun` (made when a store opens there or a tree is saved). */
export function defaultStateDir(): string {
  const xdg = process.env.XDG_STATE_HOME;
  return xdg !== undefined && isAbsolute(xdg) ? join(xdg, 'subrun') : join(homedir(), '.local', 'state', 'subrun');
}
