import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';
import { type Cloud, startCloud } from './cloud-tier.js';

/*
 * The BuildImages step fenced by generation, in the cloud simulation tier: the real step handler in
 * PREVIEW_MODE=aws, ECR and CodeBuild behind the AWS fake, the environment on dynalite. A build of a
 * generation the environment has moved past starts no CodeBuild build, also when the environment moves
 * while the step runs (after its own check, before StartBuild).
 */

const ORG = 'org-fence';
const SHA = 'c'.repeat(40);
let cloud: Cloud;

beforeAll(async () => {
  cloud = await startCloud();
}, 60_000);
afterAll(() => cloud?.stop(), 30_000);

/** An environment whose config was read (one app), at `generation`. */
async function environment(pr: number, generation: number): Promise<string> {
  const envKey = `acme/shop#${pr}`;
  const now = new Date().toISOString();
  await ddb().send(
    new PutCommand({
      TableName: table('environments'),
      Item: {
        orgId: ORG,
        envKey,
        repoFullName: 'acme/shop',
        prNumber: pr,
        status: 'building',
        phase: 'reading-config',
        createdAt: now,
        updatedAt: now,
        urls: {},
        generation,
        inputs: { headSha: SHA, headRef: 'feature' },
        apps: ['web'],
        appSpecs: { web: { port: 3000 } },
      },
    }),
  );
  return envKey;
}
/** A request that supersedes everything before it (a push, a teardown): the generation moves on. */
const bump = (envKey: string) =>
  ddb().send(
    new UpdateCommand({
      TableName: table('environments'),
      Key: { orgId: ORG, envKey },
      UpdateExpression: 'ADD generation :one',
      ExpressionAttributeValues: { ':one': 1 },
    }),
  );
const buildImages = (envKey: string, generation: number) =>
  cloud.invoke('functions/steps/build-images.ts', {
    input: { orgId: ORG, envKey, generation },
    taskToken: `token-${envKey}-${generation}`,
  });
const started = () => cloud.aws.calls.filter((c) => c === 'CodeBuild.StartBuild').length;

describe('BuildImages in AWS mode, fenced by generation', () => {
  test('the current generation starts its build (the control)', async () => {
    const envKey = await environment(1, 2);
    const before = started();
    await buildImages(envKey, 2);
    expect(started()).toBe(before + 1);
    expect(cloud.aws.builds.at(-1)!.env.SOURCE_KEY).toBe(`sources/${ORG}/acme/shop/${SHA}.tar.gz`);
  });

  test('a build requested for generation 2 after the environment moved to 3: Superseded, no build', async () => {
    const envKey = await environment(2, 3);
    const before = started();
    await expect(buildImages(envKey, 2)).rejects.toMatchObject({ name: 'Superseded' });
    expect(started()).toBe(before);
  });

  test('the environment moves to 3 while the step for 2 runs (after its check): Superseded, no build', async () => {
    const envKey = await environment(3, 2);
    const before = started();
    // Between the step's own generation check and StartBuild: the image lookup.
    cloud.aws.beforeNext('ECR.BatchGetImage', async () => {
      await bump(envKey);
    });
    await expect(buildImages(envKey, 2)).rejects.toMatchObject({ name: 'Superseded' });
    expect(started()).toBe(before);
    const { Item } = await ddb().send(
      new GetCommand({ TableName: table('environments'), Key: { orgId: ORG, envKey } }),
    );
    expect(Item).toMatchObject({ generation: 3 });
    // The race was staged where it was meant to be: the lookup ran, the build did not start.
    expect(cloud.aws.calls.filter((c) => c === 'ECR.BatchGetImage').length).toBeGreaterThan(0);
  });
});
