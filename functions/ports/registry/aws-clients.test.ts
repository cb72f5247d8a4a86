import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { type EmbeddedDynamo, ensureTables, startDynalite } from '../../../lib/local/dynalite.js';
import { FakeAws, machineArn, REGION } from '../../../test/cloud/fakes/aws.js';
import {
  cloudWatchLogsClient,
  codeBuildClient,
  ecrClient,
  secretsManagerClient,
  sfnClient,
} from './aws-clients.js';
import { githubAppCredentials } from './github-app.js';
import { mediaReader } from './media.js';
import { buildLogs } from './runtime/app-logs.js';
import { codeBuildImages, imageBuilder, imageBuilds } from './runtime/image-builder.js';
import { secretStore } from './secret-store.js';
import { workflows } from './workflows.js';

/*
 * The AWS-mode getters of the ports that call Secrets Manager, Step Functions, CodeBuild, ECR and
 * CloudWatch Logs, as a Lambda container builds them from its environment: each adapter over the
 * container's SDK client of its service (aws-clients.ts: one per service, created once, shared by the
 * adapters), in the configured region, sent to `AWS_ENDPOINT_URL_<SERVICE>` by the SDK itself (here the
 * loopback FakeAws; DynamoDB is dynalite, as in the cloud tier).
 */

const LINK_SECRET = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview/run-link-AbCdEf`;
const APP_SECRET = `arn:aws:secretsmanager:${REGION}:000000000000:secret:preview/github-app-AbCdEf`;
const REPOSITORY = `000000000000.dkr.ecr.${REGION}.amazonaws.com/preview-apps`;
const LOG_GROUP = '/preview/test/image-builds';
const aws = new FakeAws(new URL('../../..', import.meta.url).pathname);
const target = { orgId: 'o1', envKey: 'acme/shop#7', repoFullName: 'acme/shop', prNumber: 7, generation: 1 };
let dir: string;
let dynamo: EmbeddedDynamo;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'aws-clients-'));
  dynamo = await startDynalite(join(dir, 'dynamodb'));
  await aws.start();
  aws.projectLogGroups.set('preview-images', LOG_GROUP);
  delete process.env.DYNAMODB_ENDPOINT;
  Object.assign(process.env, {
    PREVIEW_MODE: 'aws',
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    SECRET_NAME_PREFIX: 'preview/test',
    STATE_MACHINE_DEPLOY_ARN: machineArn('deploy'),
    MEDIA_BUCKET: 'media',
    RUN_LINK_SECRET_ARN: LINK_SECRET,
    GITHUB_APP_SECRET_ARN: APP_SECRET,
    ARTIFACTS_BUCKET: 'preview-artifacts',
    IMAGE_BUILD_PROJECT: 'preview-images',
    IMAGE_REPOSITORY_URI: REPOSITORY,
    IMAGE_BUILD_LOG_GROUP: LOG_GROUP,
    ...(await ensureTables(dynamo.endpoint)),
    ...aws.endpointEnv(),
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
  });
}, 30_000);
afterAll(async () => {
  await aws.stop();
  await dynamo?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('registry getters over the SDK clients (AWS mode)', () => {
  test('secretStore: bundles under SECRET_NAME_PREFIX in Secrets Manager', async () => {
    const ref = { applicationId: 'a1', app: 'web' };
    expect(await secretStore().read(ref)).toBeUndefined();
    await secretStore().write(ref, { K: 'v' });
    expect(aws.secrets.get('preview/test/a1/web')).toBe('{"K":"v"}');
    expect(await secretStore().read(ref)).toEqual({ K: 'v' });
    expect(secretStore()).toBe(secretStore());
    expect(aws.calls).toEqual([
      'SecretsManager.GetSecretValue',
      'SecretsManager.PutSecretValue',
      'SecretsManager.CreateSecret',
      'SecretsManager.GetSecretValue',
    ]);
  });

  test('workflows: Step Functions (a token nobody waits on is gone)', async () => {
    const before = aws.calls.length;
    expect(await workflows().heartbeat('no-such-token')).toBe(false);
    await expect(
      workflows().completeTask('no-such-token', { ok: true, output: {} }),
    ).resolves.toBeUndefined();
    expect(aws.calls.slice(before)).toEqual(['SFN.SendTaskHeartbeat', 'SFN.SendTaskSuccess']);
  });

  test("a throttled call is retried by the SDK's standard mode (3 attempts in all)", async () => {
    const before = aws.calls.length;
    aws.failNext('SFN.SendTaskHeartbeat', 2, {
      type: 'ThrottlingException',
      message: 'Rate exceeded',
      status: 400,
    });
    expect(await workflows().heartbeat('no-such-token')).toBe(false);
    expect(aws.calls.slice(before)).toEqual(Array(3).fill('SFN.SendTaskHeartbeat'));
    aws.failNext('SFN.SendTaskHeartbeat', 3, {
      type: 'ThrottlingException',
      message: 'Rate exceeded',
      status: 400,
    });
    await expect(workflows().heartbeat('no-such-token')).rejects.toMatchObject({
      name: 'ThrottlingException',
    });
    expect(aws.calls.slice(before)).toHaveLength(6);
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

  test('image builds: CodeBuild and ECR start one, ECR, Logs and Step Functions end it, Logs reads it', async () => {
    const before = aws.calls.length;
    await imageBuilder().build(target, 'a'.repeat(40), { web: { port: 3000 } }, 'no-such-token', {});
    expect(aws.builds).toHaveLength(1);
    const build = aws.builds[0]!;
    expect(build.projectName).toBe('preview-images');
    expect(build.env).toMatchObject({ SOURCE_BUCKET: 'preview-artifacts', IMAGE_REPOSITORY_URI: REPOSITORY });
    aws.logBuild(build.id, ['Step 1/2 : FROM node:22', 'npm ERR! missing script: build']);
    const event = aws.finishBuild(build.id, 'FAILED', [
      'PREVIEW-BUILD-FAILED app=web: docker build exited 1',
    ]);
    expect(await imageBuilds().onBuildFinished(event.detail as never)).toBe('completed');
    const text = await buildLogs().logs(target, 'web', { source: 'build', tailLines: 2, maxBytes: 1000 });
    expect(text).toEqual({
      text: 'npm ERR! missing script: build\nPREVIEW-BUILD-FAILED app=web: docker build exited 1\n',
      truncated: true,
    });
    expect(aws.calls.slice(before)).toEqual([
      'ECR.BatchGetImage',
      'CodeBuild.StartBuild',
      'Logs.GetLogEvents',
      'SFN.SendTaskFailure', // nobody waits on this token: TaskDoesNotExist, ignored
      'Logs.GetLogEvents',
    ]);
  });

  test('one client per service for the container, shared by every adapter that calls it', async () => {
    const secrets = secretsManagerClient();
    expect(secretsManagerClient()).toBe(secrets);
    const clients = [secrets, sfnClient(), codeBuildClient(), ecrClient(), cloudWatchLogsClient()];
    expect(new Set(clients).size).toBe(clients.length);
    for (const client of clients) expect(await client.config.region()).toBe(REGION);
    // The secret store's calls go through it, and so do the GitHub App key's and the run-link key's.
    const send = jest.spyOn(secrets, 'send');
    try {
      expect(await secretStore().read({ applicationId: 'a1', app: 'web' })).toEqual({ K: 'v' });
      await expect(githubAppCredentials().get()).rejects.toThrow(/not filled in/);
      const sent = send.mock.calls.map(([command]) => (command as GetSecretValueCommand).input);
      expect(sent).toEqual([{ SecretId: 'preview/test/a1/web' }, { SecretId: APP_SECRET }]);
    } finally {
      send.mockRestore();
    }
    // The image-build adapters share theirs the same way.
    const sfnSend = jest.spyOn(sfnClient(), 'send');
    try {
      await codeBuildImages().build(target, 'b'.repeat(40), {}, 'no-such-token', {});
      expect(sfnSend).toHaveBeenCalledTimes(1); // no app to build: the task ends at once
    } finally {
      sfnSend.mockRestore();
    }
  });
});
