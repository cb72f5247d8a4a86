import * as z from 'zod/mini';
import { assertDeploySlot } from '../../core/applications/index.js';
import { requestPrDeploy, statusPath } from '../../core/environments/index.js';
import { keys } from '../../manifest/tables.js';
import { workflows } from '../../ports/registry/workflows.js';
import { jsonInteger } from '../../shared/json-literal.js';
import { MAX_PR, repoFullName } from '../../shared/validation.js';
import { route } from '../route.js';

const body = z.object({
  repoFullName,
  prNumber: z.number().check(z.int(), z.gte(1, 'must be an integer >= 1'), z.lte(MAX_PR)),
  headSha: z.string().check(z.regex(/^[0-9a-f]{7,40}$/i, 'must be a commit SHA')),
  headRef: z.string().check(z.minLength(1), z.maxLength(255)),
  baseSha: z.optional(z.string().check(z.regex(/^[0-9a-f]{7,40}$/i, 'must be a commit SHA'))),
  cloneUrl: z.optional(z.string()), // deprecated, ignored: the build clones from repoFullName
  baseRef: z.optional(z.string()), // deprecated, ignored
});

/** POST /v1/preview/environments: create or redeploy a PR environment (fire-and-forget, 202). */
export const { main, handler } = route('createEnvironment', { body, bodyRequired: true }, async (req) => {
  jsonInteger(req.rawBody, 'prNumber');
  const { repoFullName, prNumber, headSha, headRef, baseSha } = req.body;
  await assertDeploySlot(req.principal.orgId, keys.environments.envKey(repoFullName, prNumber));
  const env = await requestPrDeploy(workflows(), req.principal.orgId, repoFullName, prNumber, {
    headSha,
    headRef,
    baseSha,
  });
  const repo = env.repoFullName;
  return {
    statusCode: 202,
    body: {
      accepted: true,
      repoFullName: repo,
      prNumber,
      statusUrl: statusPath(repo, prNumber),
      environmentId: env.environmentId,
    },
  };
});
