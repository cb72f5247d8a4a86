import * as z from 'zod/mini';
import { findEnvironment } from '../../core/environments/index.js';
import { commitView } from '../../core/gate/index.js';
import { reportLink } from '../../core/runs/index.js';
import { keys } from '../../manifest/tables.js';
import { linkSigner } from '../../ports/registry/link-signer.js';
import { NotFoundError } from '../../shared/errors.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

const parameters = {
  commit: z
    .optional(z.string().check(z.regex(/^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/, 'must be a full commit SHA')))
    .register(z.globalRegistry, {
      description: "The head commit (its full SHA); absent: the pull request's latest head the gate saw.",
    }),
};
const query = z.strictObject(parameters, {
  error: (issue) =>
    issue.code === 'unrecognized_keys'
      ? `unknown parameter ${issue.keys.map((k) => `"${k}"`).join(', ')} (this route takes commit)`
      : undefined,
});

/**
 * GET /v1/preview/environments/{owner}/{repo}/{pr}/gate?commit=<sha>: the merge gate of one head commit
 * of the pull request (the latest head without `commit`): its check run's status, conclusion and title,
 * what ended its story (a skip names who and why), and each run (test, status, duration, retries, a
 * quarantine, a signed report link). What the dashboard's per-commit view shows. 404 when the
 * environment is not the caller's organization's, or that head has no check run.
 */
export const { main, handler } = route('getGate', { params: envPathSchema, query }, async (req) => {
  const ref = envRef(req.principal.orgId, req.params);
  const envKey = keys.environments.envKey(ref.repoFullName, ref.prNumber);
  if (!(await findEnvironment(ref.orgId, envKey))) throw new NotFoundError('environment not found');
  const view = await commitView({ orgId: ref.orgId, envKey }, req.query.commit, (runId) =>
    reportLink(linkSigner(), req.baseUrl, runId),
  );
  if (!view)
    throw new NotFoundError(
      req.query.commit ? 'that commit has no check run' : 'the pull request has no check run yet',
    );
  return { statusCode: 200, body: view };
});
