// Test tiers: unit (no network), integration (real HTTP against the local server and dynalite),
// infra (CDK Template assertions), fuzz (property-based probing of every route over real HTTP; FUZZ_RUNS
// cases per route). Each is its own project so each has its own npm script.
const transform = {
  '^.+\\.ts$': [
    '@swc/jest',
    { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'es6' } },
  ],
};
const common = {
  testEnvironment: 'node',
  transform,
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  setupFiles: ['<rootDir>/functions/shared/polyfills.ts', '<rootDir>/test/support/env.ts'],
};
export default {
  // A test that sets no timeout of its own gets 20 s, not Jest's 5 s: CI runs the tiers' workers on two
  // shared cores, where a git checkout or a first Kubernetes client call can take seconds.
  testTimeout: 20_000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      // @sparticuz/chromium unpacked once before the browser contract tests.
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      testMatch: [
        '<rootDir>/test/unit/**/*.test.ts',
        '<rootDir>/functions/**/*.test.ts',
        '<rootDir>/lib/**/*.test.ts',
      ],
    },
    {
      ...common,
      displayName: 'integration',
      // What this machine lacks, in one line; the packaged Chromium unpacked once for local runs.
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      testMatch: ['<rootDir>/test/integration/**/*.test.ts'],
    },
    { ...common, displayName: 'infra', testMatch: ['<rootDir>/test/infra/**/*.test.ts'] },
    { ...common, displayName: 'fuzz', testMatch: ['<rootDir>/test/fuzz/**/*.test.ts'] },
    {
      ...common,
      displayName: 'cloud',
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      testMatch: ['<rootDir>/test/cloud/**/*.test.ts'],
    },
  ],
};
