// The manual clock lives in the package's testing face (users' tests want it too).
export { ManualClock, flush } from '../../src/testing/manual-clock.ts';
