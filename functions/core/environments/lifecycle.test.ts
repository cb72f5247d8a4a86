import { DynamoDBDocumentClient, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import { sampleEnvironment } from '../../../test/support/environments.js';
import type { BundleRef, SecretStore } from '../../ports/secret-store/port.js';
import { ACCESS_KEY_APP, rotateAccessKey } from '../applications/access.js';
import { environmentStatus } from './lifecycle.js';

/*
 * The status poll (GET …/environments/{owner}/{repo}/{pr}) at the SDK boundary: what it reads for a
 * public, a protected and an older environment record (one without the access its deploy recorded).
 */
useAwsSettings();

const dynamo = mockClient(DynamoDBDocumentClient);
const application = {
  applicationId: 'app-1',
  orgId: 'org-1',
  name: 'shop',
  repoFullName: 'acme/shop',
  disabled: false,
  installationActive: true,
  createdAt: '2030-01-01T00:00:00.000Z',
};
/** A secret store holding the application's access key; every read recorded. */
const store = () => {
  const bundles = new Map<string, Record<string, string>>();
  const reads: BundleRef[] = [];
  const secrets = {
    read: async (ref: BundleRef) => {
      reads.push(ref);
      return bundles.get(`${ref.applicationId}/${ref.app}`);
    },
    write: async (ref: BundleRef, values: Record<string, string>) => {
      bundles.set(`${ref.applicationId}/${ref.app}`, values);
    },
  } as unknown as SecretStore;
  return { secrets, reads };
};
const ref = { orgId: 'org-1', repoFullName: 'acme/shop', prNumber: 7 };

beforeEach(() => {
  dynamo.reset();
  dynamo.on(QueryCommand).resolves({ Items: [application] });
});

describe('environmentStatus', () => {
  test('a public environment (as its deploy recorded it): one GetItem, no application, no secret read', async () => {
    dynamo.on(GetCommand).resolves({ Item: sampleEnvironment({ orgId: 'org-1', access: 'public' }) });
    const { secrets, reads } = store();
    await rotateAccessKey(secrets, 'app-1');
    reads.length = 0;
    const status = await environmentStatus(ref, secrets);
    expect(status).toMatchObject({ status: 'ready', urls: { web: 'http://127.0.0.1:4001' } });
    expect(status.accessUrls).toBeUndefined();
    expect(dynamo.calls().map((c) => c.args[0].constructor.name)).toEqual(['GetCommand']);
    expect(reads).toEqual([]);
  });

  test("a protected environment: its application's access key signs a link per app", async () => {
    dynamo.on(GetCommand).resolves({ Item: sampleEnvironment({ orgId: 'org-1', access: 'protected' }) });
    const { secrets, reads } = store();
    await rotateAccessKey(secrets, 'app-1');
    reads.length = 0;
    const status = await environmentStatus(ref, secrets);
    expect(Object.keys(status.accessUrls ?? {})).toEqual(['web', 'api']);
    expect(dynamo.calls().map((c) => c.args[0].constructor.name)).toEqual(['GetCommand', 'QueryCommand']);
    expect(reads).toEqual([{ applicationId: 'app-1', app: ACCESS_KEY_APP }]);
  });

  test("an older record, without the access of its deploy: the application's setting decides (AWS: protected)", async () => {
    dynamo.on(GetCommand).resolves({ Item: sampleEnvironment({ orgId: 'org-1' }) });
    const { secrets } = store();
    await rotateAccessKey(secrets, 'app-1');
    expect(Object.keys((await environmentStatus(ref, secrets)).accessUrls ?? {})).toEqual(['web', 'api']);
    dynamo.on(QueryCommand).resolves({ Items: [{ ...application, access: 'public' }] });
    expect((await environmentStatus(ref, secrets)).accessUrls).toBeUndefined();
  });
});
