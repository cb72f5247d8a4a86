import * as z from 'zod/mini';
import { undeclaredAppWarning } from '../../core/environments/index.js';
import { upsertSecrets } from '../../core/secrets/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { envVarKey } from '../../shared/validation.js';
import { route } from '../route.js';
import { bundlePath, secretValue } from './schemas.js';

const body = z.object({
  items: z
    .array(z.object({ key: envVarKey, value: secretValue }))
    .check(z.minLength(1, 'items must have at least 1 element')),
});

/**
 * PUT /v1/preview/secrets/{applicationId}/{app}: merge items into the bundle (created on first call); a
 * `warning` when no environment of the application declares the app.
 */
export const { main, handler } = route(
  'putSecrets',
  { params: bundlePath, body, bodyRequired: true },
  async (req) => {
    const { applicationId, app } = req.params;
    const count = await upsertSecrets(
      secretStore(),
      req.principal.orgId,
      { applicationId, app },
      req.body.items,
    );
    const warning = await undeclaredAppWarning(req.principal.orgId, applicationId, app);
    return {
      statusCode: 200,
      body: { applicationId, app, status: 'saved', count, ...(warning ? { warning } : {}) },
    };
  },
);
