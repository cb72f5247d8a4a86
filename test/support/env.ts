/**
 * Settings every test process starts with (jest `setupFiles`). The organization's fair share
 * (core/fair-share.ts) is raised far above what the suites send, so that tests which fire many requests
 * (fuzzing, storms, benchmarks) measure their subject rather than the limiter, while the limiter's code
 * path still runs on every request; test/integration/applications/fair-share.test.ts sets low limits and
 * tests them.
 * A value a test or the shell set is kept.
 */
process.env.PREVIEW_ORG_REQUESTS_PER_SECOND ??= '10000';
process.env.PREVIEW_ORG_CONCURRENT_DEPLOYS ??= '1000';
process.env.PREVIEW_ORG_CONCURRENT_RUNS ??= '1000';

export {};
