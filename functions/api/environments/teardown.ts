import { requestTeardown } from '../../core/environments/index.js';
import { workflows } from '../../ports/registry/workflows.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

/** DELETE /v1/preview/environments/{owner}/{repo}/{pr}: tear down (202 even when there is nothing to do). */
export const { main, handler } = route('teardownEnvironment', { params: envPathSchema }, async (req) => {
  const ref = envRef(req.principal.orgId, req.params);
  await requestTeardown(workflows(), ref);
  return {
    statusCode: 202,
    body: { accepted: true, repoFullName: ref.repoFullName, prNumber: ref.prNumber },
  };
});
