// The wire as data, in three files by what they describe: the objects (entities.ts), the events
// (events.ts) and the methods' params and results (methods.ts). Imports only zod.
export * from './entities.ts';
export * from './events.ts';
export * from './methods.ts';
