import { DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { useAwsSettings } from '../../../test/support/aws-env.js';
import type { AppSpec } from '../../ports/runtime/port.js';
import type { BundleRef, SecretStore } from '../../ports/secret-store/port.js';
import { FACTORY_SECRET_APP, FACTORY_SECRET_VAR } from '../scenarios/factory.js';
import { planLaunch } from './launch.js';

/*
 * The launch plan of a deploy: what each app starts with (its variables, which of them are secrets, its
 * image) and the front door it sits behind, from the application the environment belongs to (read at the
 * SDK boundary) and its secret bundles (a fake store).
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
  factoryApp: 'api',
  sleepAfterMinutes: 45,
};
beforeEach(() => {
  dynamo.reset();
  dynamo.on(QueryCommand).resolves({ Items: [application] });
});

/** A secret store holding `bundles` (app → values), recording what was read. */
function store(bundles: Record<string, Record<string, string>>): SecretStore & { reads: BundleRef[] } {
  const reads: BundleRef[] = [];
  return {
    reads,
    read: async (ref) => {
      reads.push(ref);
      return bundles[ref.app];
    },
    write: async () => {
      throw new Error('a launch plan writes no secret');
    },
  };
}

const apps = {
  web: { port: 3000, command: 'npm start', env: { MODE: 'preview', SHARED: 'from-yaml' } },
  api: { port: 4000, command: 'npm start' },
} satisfies Record<string, AppSpec>;
const env = (over: Record<string, unknown> = {}) => ({
  orgId: 'org-1',
  repoFullName: 'acme/shop',
  prNumber: 7,
  ...over,
});

describe('planLaunch', () => {
  test('each app: preview.yaml env, then its bundle (which wins); the factory app gets the factory secret; images', async () => {
    const secrets = store({
      web: { SHARED: 'from-bundle', TOKEN: 't0ken' },
      [FACTORY_SECRET_APP]: { [FACTORY_SECRET_VAR]: 'f4ctory' },
    });
    const plan = await planLaunch({ secrets }, env(), apps, { web: 'repo/web@sha256:1' });
    expect(plan.launches).toEqual([
      {
        name: 'web',
        spec: apps.web,
        vars: { MODE: 'preview', SHARED: 'from-bundle', TOKEN: 't0ken' },
        secretKeys: ['SHARED', 'TOKEN'],
        image: 'repo/web@sha256:1',
      },
      {
        name: 'api',
        spec: apps.api,
        vars: { [FACTORY_SECRET_VAR]: 'f4ctory' },
        secretKeys: [FACTORY_SECRET_VAR],
      },
    ]);
    expect(plan.frontDoor).toEqual({
      access: 'protected',
      sleepAfterMs: 45 * 60_000,
      applicationId: 'app-1',
    });
  });

  test("preview.yaml's factory app wins over the application's", async () => {
    const secrets = store({ [FACTORY_SECRET_APP]: { [FACTORY_SECRET_VAR]: 'f4ctory' } });
    const plan = await planLaunch({ secrets }, env({ factory: { app: 'web', path: '/f' } }), apps, {});
    expect(plan.launches.map((l) => [l.name, l.secretKeys])).toEqual([
      ['web', [FACTORY_SECRET_VAR]],
      ['api', []],
    ]);
  });

  test("a fork's head: no bundle and no factory secret is read, yet its front door is the application's", async () => {
    const secrets = store({ web: { TOKEN: 't0ken' } });
    const plan = await planLaunch(
      { secrets },
      env({ inputs: { headSha: 'a', headRef: 'b', fork: true } }),
      apps,
      {},
    );
    expect(secrets.reads).toEqual([]);
    expect(plan.launches.map((l) => l.vars)).toEqual([{ MODE: 'preview', SHARED: 'from-yaml' }, {}]);
    expect(plan.frontDoor).toEqual({
      access: 'protected',
      sleepAfterMs: 45 * 60_000,
      applicationId: 'app-1',
    });
  });

  test('a repository no application links: no secrets, the default front door, no key to sign links', async () => {
    dynamo.on(QueryCommand).resolves({ Items: [] });
    const plan = await planLaunch({ secrets: store({}) }, env({ prNumber: 0 }), apps, {});
    expect(plan.launches.map((l) => l.secretKeys)).toEqual([[], []]);
    // AWS mode: protected unless the application says otherwise; the main-branch environment never sleeps.
    expect(plan.frontDoor).toEqual({ access: 'protected', sleepAfterMs: 0 });
  });
});
