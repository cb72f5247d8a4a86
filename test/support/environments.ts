import type { Environment } from '../../functions/core/environments/lifecycle.js';

/** A ready PR preview (acme/shop #7, two apps) as the environments table holds it; `over` replaces fields. */
export const sampleEnvironment = (over: Partial<Environment> = {}): Environment => ({
  orgId: 'org-1',
  envKey: 'acme/shop#7',
  repoFullName: 'acme/shop',
  prNumber: 7,
  status: 'ready',
  createdAt: '2030-01-01T00:00:00.000Z',
  updatedAt: '2030-01-01T00:01:00.000Z',
  lastDeployAt: '2030-01-01T00:00:00.000Z',
  urls: { web: 'http://127.0.0.1:4001', api: 'http://127.0.0.1:4002' },
  generation: 3,
  inputs: { headSha: 'a'.repeat(40), headRef: 'feature' },
  ...over,
});
