import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { checkAccessToken, cookieValue } from '../../functions/shared/access-token.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { type Cloud, startCloud } from './cloud-tier.js';

/*
 * The front door in the cloud simulation tier: a protected preview's Environment Factory, called at its
 * public URL behind the ingress's external auth (here a loopback stand-in that checks the access cookie as
 * the verifier does). A `down` owed after the executor died (MarkFailed, the sweep: `sendOwedDown`) carries a
 * fresh access cookie of that environment, signed with the key read from (fake) Secrets Manager; the record
 * keeps the environment, never a token.
 */

const orgId = 'org-factory-access';
const applicationId = 'app-factory-access';
const scope = { orgId, envKey: 'acme/doors#4' };

let cloud: Cloud;
let factory: Server;
let factoryUrl: string;
let key: string;
let scenarios: typeof import('../../functions/core/scenarios/factory.js');
let store: ReturnType<typeof import('../../functions/ports/registry/secret-store.js').secretStore>;
/** What reached the factory: the action, and whether the request carried a valid access cookie. */
const seen: { action: string; cookie: 'ok' | string }[] = [];

beforeAll(async () => {
  cloud = await startCloud();
  const access = await import('../../functions/core/applications/access.js');
  scenarios = await import('../../functions/core/scenarios/factory.js');
  store = (await import('../../functions/ports/registry/secret-store.js')).secretStore();
  key = await access.ensureAccessKey(store, applicationId);
  await scenarios.ensureFactorySecret(store, applicationId);
  factory = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const check = checkAccessToken(key, scope, cookieValue(req.headers.cookie), Date.now());
      seen.push({ action: (JSON.parse(body || '{}') as { action: string }).action, cookie: check });
      if (check !== 'ok') return res.writeHead(401, { 'content-type': 'text/plain' }).end('protected');
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => factory.listen(0, '127.0.0.1', r));
  factoryUrl = `http://127.0.0.1:${(factory.address() as AddressInfo).port}/_factory`;
}, 60_000);
afterAll(async () => {
  await cloud?.stop();
  await new Promise((r) => factory?.close(r));
}, 30_000);

/** A run whose executor died after `up`: its scenario record, as the executor left it. */
async function owingRun(runId: string, factoryAccess?: typeof scope) {
  await ddb().send(
    new PutCommand({
      TableName: table('runs'),
      Item: {
        runId,
        orgId,
        applicationId,
        scenarioState: {
          setupId: 'setup-1',
          name: 'signed-in',
          version: 1,
          testRunId: runId,
          testRunShortId: runId.slice(0, 8),
          factoryUrl,
          ...(factoryAccess ? { factoryAccess } : {}),
          status: 'up',
        },
      },
    }),
  );
  return (await ddb().send(new GetCommand({ TableName: table('runs'), Key: { runId } }))).Item!;
}
const stateOf = async (runId: string) =>
  (await ddb().send(new GetCommand({ TableName: table('runs'), Key: { runId } }))).Item!.scenarioState;

describe("an owed down to a protected preview's factory", () => {
  test('carries a fresh access cookie of its environment, and the factory takes it', async () => {
    const run = await owingRun('run-fa-1', scope);
    expect(await scenarios.sendOwedDown({ secrets: store }, run as never, { by: 'mark-failed' })).toBe(true);
    expect(seen.at(-1)).toEqual({ action: 'down', cookie: 'ok' });
    const state = await stateOf('run-fa-1');
    expect(state.status).toBe('down');
    expect(JSON.stringify(state)).not.toContain('v1.');
  });

  test('a record without the environment (a public preview then) sends none: the door refuses it', async () => {
    const run = await owingRun('run-fa-2');
    expect(await scenarios.sendOwedDown({ secrets: store }, run as never, { retryMs: 0 })).toBe(true);
    expect(seen.at(-1)).toEqual({ action: 'down', cookie: 'missing' });
    const state = await stateOf('run-fa-2');
    expect(state.status).toBe('down_failed');
    expect(state.downError).toContain('refused down');
    expect(state.downError).not.toContain(key);
  });
});
