import * as z from 'zod';
import { requestPrDeploy, statusPath } from '../../core/environments.js';
import { workflows } from '../../ports/registry/workflows.js';
import { jsonInteger } from '../../shared/json-literal.js';
import { MAX_PR, repoFullName } from '../../shared/validation.js';
import { route } from '../route.js';

const body = z.object({
  repoFullName,
  prNumber: z.number().int().min(1, 'must be an integer >= 1').max(MAX_PR),
  headSha: z.string().regex(/^[0-9a-f]{7,40}$/i, 'must be a commit SHA'),
  headRef: z.string().min(1).max(255),
  baseSha: z
    .string()
    .regex(/^[0-9a-f]{7,40}$/i, 'must be a commit SHA')
    .optional(),
  cloneUrl: z.string().optional(), // deprecated, ignored: the build clones from repoFullName
  baseRef: z.string().optional(), // deprecated, ignored
});

/** POST /v1/preview/environments: create or redeploy a PR environment (fire-and-forget, 202). */
export const { main, handler } = route('createEnvironment', { body, bodyRequired: true }, async (req) => {
  jsonInteger(req.rawBody, 'prNumber');
  const { repoFullName, prNumber, headSha, headRef, baseSha } = req.body;
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
