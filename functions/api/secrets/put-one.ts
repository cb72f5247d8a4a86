import * as z from 'zod/mini';
import { undeclaredAppWarning } from '../../core/environments/index.js';
import { upsertSecrets } from '../../core/secrets/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { route } from '../route.js';
import { keyPath, secretValue } from './schemas.js';

const body = z.object({ value: secretValue });

/** PUT /v1/preview/secrets/{applicationId}/{app}/{key}: upsert one key; a `warning` as putSecrets. */
export const { main, handler } = route(
  'putSecret',
  { params: keyPath, body, bodyRequired: true },
  async (req) => {
    const { applicationId, app, key } = req.params;
    await upsertSecrets(secretStore(), req.principal.orgId, { applicationId, app }, [
      { key, value: req.body.value },
    ]);
    const warning = await undeclaredAppWarning(req.principal.orgId, applicationId, app);
    return {
      statusCode: 200,
      body: { applicationId, app, key, status: 'saved', ...(warning ? { warning } : {}) },
    };
  },
);
