import { deleteSecret } from '../../core/secrets/index.js';
import { secretStore } from '../../ports/registry/secret-store.js';
import { route } from '../route.js';
import { keyPath } from './schemas.js';

/** DELETE /v1/preview/secrets/{applicationId}/{app}/{key}: delete one key (404 if bundle or key is absent). */
export const { main, handler } = route('deleteSecret', { params: keyPath }, async (req) => {
  const { applicationId, app, key } = req.params;
  await deleteSecret(secretStore(), req.principal.orgId, { applicationId, app }, key);
  return { statusCode: 200, body: { applicationId, app, key, status: 'deleted' } };
});
