import * as z from 'zod/mini';
import { gateLinks, skipGate } from '../../core/gate/index.js';
import { linkSigner } from '../../ports/registry/link-signer.js';
import { prStatus } from '../../ports/registry/pr-status.js';
import { route } from '../route.js';
import { envPathSchema, envRef } from './schemas.js';

const text = (max: number) => z.string().check(z.maxLength(max), z.regex(/\S/, 'must not be empty'));
const body = z.object({ reason: text(500), by: text(100) });

/**
 * POST /v1/preview/environments/{owner}/{repo}/{pr}/gate/skip: skip the merge gate of the pull
 * request's head with a reason (200): its check run completes `neutral`, naming who and why, as a
 * `/preview skip-tests <reason>` comment does. 409 when the head has no check run.
 */
export const { main, handler } = route(
  'skipGate',
  { params: envPathSchema, body, bodyRequired: true },
  async (req) => {
    const ref = envRef(req.principal.orgId, req.params);
    const skipped = await skipGate({ prStatus: prStatus(), links: gateLinks(linkSigner) }, ref, {
      by: req.body.by.trim(),
      reason: req.body.reason.trim(),
    });
    return { statusCode: 200, body: { repoFullName: ref.repoFullName, prNumber: ref.prNumber, ...skipped } };
  },
);
