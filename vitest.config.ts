import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['./test/support/build.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Race properties are CPU-bound; two workers match the machine's two cores.
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
