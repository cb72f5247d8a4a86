import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, test } from '@jest/globals';
import { keys } from '../../../functions/manifest/tables.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { bearer, call } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';

// Credentials are trusted per container for PREVIEW_AUTH_CACHE_SECONDS (here 1 s): a revoked API key
// stops working within that bound, and a wrong secret for a cached key is refused at once.
const h = localServerForFile({ env: { PREVIEW_AUTH_CACHE_SECONDS: '1' } });

describe('the per-container credential cache', () => {
  test('a revoked API key stops working within the documented bound', async () => {
    const org = await h.newOrg('revoked');
    const path = '/v1/preview/environments/acme/web/1';
    expect((await call(h, 'GET', path, { headers: bearer(org) })).status).toBe(404); // authenticated
    // The same key with a wrong secret is refused even while its hash is cached.
    const wrong = `${org.apiKey.slice(0, -4)}AAAA`;
    expect((await call(h, 'GET', path, { headers: { authorization: `Bearer ${wrong}` } })).status).toBe(401);
    const keyId = /^pvk_([a-z0-9]+)_/.exec(org.apiKey)![1]!;
    await ddb().send(
      new DeleteCommand({ TableName: table('tenancy'), Key: { pk: keys.tenancy.apiKey(keyId) } }),
    );
    const revokedAt = Date.now();
    let status = 404;
    while (status !== 401 && Date.now() - revokedAt < 5_000) {
      status = (await call(h, 'GET', path, { headers: bearer(org) })).status;
      if (status !== 401) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(2_500);
  });
});
