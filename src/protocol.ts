// subrun/protocol: the wire as data: the zod schemas of every method's params and result and of
// every event, the types inferred from them, the error codes and the catalog of names. A host
// validates what it receives with the same schemas the server is held to. Imports no runtime.
import catalog from './contract/catalog.json' with { type: 'json' };

export * from './contract/wire.ts';
export { RpcCode, RpcError } from './server/errors.ts';
/** Every method and event name the server answers and sends, sorted. */
export const CATALOG: { readonly methods: readonly string[]; readonly events: readonly string[] } = catalog;
