// The package's name and version, read once from package.json.
import { createRequire } from 'node:module';

const pkg = createRequire(import.meta.url)('../package.json') as { name: string; version: string };

export const SERVER_NAME: string = pkg.name;
export const VERSION: string = pkg.version;
