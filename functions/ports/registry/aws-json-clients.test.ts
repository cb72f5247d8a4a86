import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { FakeAws, machineArn, REGION } from '../../../test/cloud/fakes/aws.js';
import { tableNames, tables } from '../../manifest/tables.js';
import { SECRETS_MANAGER, SFN } from '../../shared/aws-json.js';
import { awsClient } from './aws-clients.js';
import { githubAppCredentials } from './github-app.js';
import { mediaReader } from './media.js';
import { secretStore } from './secret-store.js';
import { workflows } from './workflows.js';

/*
 * The AWS-mode getters of the ports that call Step Functions and Secrets Manager, as a Lambda container
 * builds them from its environment: each adapter's JSON-protocol client in the configured region, sent to
 * `AWS_ENDPOINT_URL_<SERVICE>` (here the loopback FakeAws), created once and reused.
 */

const LINK_SECRET = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview/run-link-AbCdEf`;
const APP_SECRET = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview/github-app-AbCdEf`;
const aws = new FakeAws(new URL('../../..', import.meta.url).pathname);

beforeAll(async () => {
  await aws.start();
  Object.assign(process.env, {
    PREVIEW_MODE: 'aws',
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    SECRET_NAME_PREFIX: 'preview/test',
    STATE_MACHINE_DEPLOY_ARN: machineArn('deploy'),
    MEDIA_BUCKET: 'media',
    RUN_LINK_SECRET_ARN: LINK_SECRET,
    GITHUB_APP_SECRET_ARN: APP_SECRET,
    ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
    ...aws.endpointEnv(),
  });
});
afterAll(() => aws.stop());

describe('registry getters over AwsJsonClient (AWS mode)', () => {
  test('secretStore: bundles under SECRET_NAME_PREFIX in Secrets Manager', async () => {
    const ref = { applicationId: 'a1', app: 'web' };
    expect(await secretStore().read(ref)).toBeUndefined();
    await secretStore().write(ref, { K: 'v' });
    expect(aws.secrets.get('preview/test/a1/web')).toBe('{"K":"v"}');
    expect(await secretStore().read(ref)).toEqual({ K: 'v' });
    expect(secretStore()).toBe(secretStore());
  });

  test('workflows: Step Functions (a token nobody waits on is gone)', async () => {
    const before = aws.calls.length;
    expect(await workflows().heartbeat('no-such-token')).toBe(false);
    await expect(
      workflows().completeTask('no-such-token', { ok: true, output: {} }),
    ).resolves.toBeUndefined();
    expect(aws.calls.slice(before)).toEqual(['SFN.SendTaskHeartbeat', 'SFN.SendTaskSuccess']);
  });

  test('githubAppCredentials: the App secret of GITHUB_APP_SECRET_ARN, read once', async () => {
    aws.secrets.set(APP_SECRET, JSON.stringify({ appId: '', privateKey: '', webhookSecret: '' }));
    await expect(githubAppCredentials().get()).rejects.toThrow(/the GitHub App secret is not filled in/);
    expect(githubAppCredentials().secretArn).toBe(APP_SECRET);
  });

  test('mediaReader: report links signed with the key in RUN_LINK_SECRET_ARN', async () => {
    aws.secrets.set(LINK_SECRET, 'k'.repeat(64));
    const before = aws.calls.filter((c) => c === 'SecretsManager.GetSecretValue').length;
    const query = new URLSearchParams(await mediaReader().signLink('/runs/r1/report', 60));
    expect(await mediaReader().checkLink('/runs/r1/report', query.get('expires')!, query.get('sig')!)).toBe(
      'ok',
    );
    expect(aws.calls.filter((c) => c === 'SecretsManager.GetSecretValue').length - before).toBe(1);
  });

  test('awsClient: one client per service for the container, shared by every adapter that calls it', async () => {
    const secrets = awsClient(SECRETS_MANAGER);
    expect(awsClient(SECRETS_MANAGER)).toBe(secrets);
    expect(awsClient(SFN)).not.toBe(secrets);
    // The secret store's calls go through it (as the GitHub App key's and the run-link key's do).
    const call = jest.spyOn(secrets, 'call');
    try {
      expect(await secretStore().read({ applicationId: 'a1', app: 'web' })).toEqual({ K: 'v' });
      expect(call).toHaveBeenCalledWith('GetSecretValue', { SecretId: 'preview/test/a1/web' });
    } finally {
      call.mockRestore();
    }
  });
});
