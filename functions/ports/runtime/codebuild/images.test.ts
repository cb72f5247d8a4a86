import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CloudWatchLogsClient,
  CloudWatchLogsServiceException,
  GetLogEventsCommand,
  ResourceNotFoundException,
} from '@aws-sdk/client-cloudwatch-logs';
import { AccountLimitExceededException, CodeBuildClient, StartBuildCommand } from '@aws-sdk/client-codebuild';
import { BatchGetImageCommand, ECRClient } from '@aws-sdk/client-ecr';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { type EmbeddedDynamo, ensureTables, startDynalite } from '../../../../lib/local/dynalite.js';
import { keys } from '../../../manifest/tables.js';
import { ddb, table } from '../../../shared/aws/dynamo.js';
import type { TaskOutcome } from '../../workflows/port.js';
import { BuildLogs } from './build-logs.js';
import { BUILD_REF_VAR, type BuildStateChange, CodeBuildImages } from './images.js';

/*
 * CodeBuildImages and BuildLogs at their SDK boundary: aws-sdk-client-mock on the CodeBuild, ECR and
 * CloudWatch Logs clients records each command (its input) and answers as the services would (scripted
 * below from the fake repository and log streams); the build records are in an in-process dynalite. The
 * whole flow with the real handlers and SDK clients (deploy, completion event, the logs route) is
 * test/cloud/deploy.cloud.test.ts and logs.cloud.test.ts.
 */

const REPOSITORY_URI = '000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps';
const SHA = 'a'.repeat(40);
/** The commit every image of the fake repository says it was built from. */
const BUILT_FROM = 'b'.repeat(40);
const target = { orgId: 'o1', envKey: 'acme/shop#7', repoFullName: 'acme/shop', prNumber: 7, generation: 3 };

let dir: string;
let dynamo: EmbeddedDynamo;
let saved: Record<string, string | undefined> = {};
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'codebuild-images-'));
  dynamo = await startDynalite(join(dir, 'dynamodb'));
  const vars = {
    PREVIEW_MODE: 'aws',
    AWS_REGION: 'eu-west-1',
    DYNAMODB_ENDPOINT: dynamo.endpoint,
    ...(await ensureTables(dynamo.endpoint)),
  };
  saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
}, 30_000);
afterAll(async () => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  await dynamo?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const codebuildClient = new CodeBuildClient({ region: 'eu-west-1' });
const ecrClient = new ECRClient({ region: 'eu-west-1' });
const logsClient = new CloudWatchLogsClient({ region: 'eu-west-1' });
const codebuild = mockClient(codebuildClient);
const ecr = mockClient(ecrClient);
const logs = mockClient(logsClient);
let completed: { token: string; outcome: TaskOutcome }[];
/** Tags pushed to the fake repository: tag → digest. */
let pushed: Map<string, string>;
/** Log events of the fake log streams: `group/stream` → messages. */
let streams: Map<string, string[]>;

beforeEach(() => {
  completed = [];
  pushed = new Map();
  streams = new Map();
  codebuild.reset();
  ecr.reset();
  logs.reset();
  codebuild.on(StartBuildCommand).callsFake((input) => ({
    build: {
      id: `${input.projectName}:build-1`,
      arn: 'arn:aws:codebuild:eu-west-1:000000000000:build/p:build-1',
      buildStatus: 'IN_PROGRESS',
      startTime: new Date('2026-01-01T00:00:00.123Z'), // nothing here reads it
    },
  }));
  ecr.on(BatchGetImageCommand).callsFake((input) => {
    const images = [];
    const failures = [];
    for (const imageId of input.imageIds as { imageTag: string }[]) {
      const digest = pushed.get(imageId.imageTag);
      if (digest)
        images.push({
          repositoryName: input.repositoryName,
          imageId: { imageTag: imageId.imageTag, imageDigest: digest },
          // As the buildspec's `--annotation manifest:…` writes it: the commit the image was built from.
          imageManifest: JSON.stringify({
            schemaVersion: 2,
            annotations: { 'org.opencontainers.image.revision': BUILT_FROM },
          }),
        });
      else
        failures.push({ imageId, failureCode: 'ImageNotFound', failureReason: 'Requested image not found' });
    }
    return { images, failures };
  });
  logs.on(GetLogEventsCommand).callsFake((input) => {
    const lines = streams.get(`${input.logGroupName}/${input.logStreamName}`);
    if (!lines)
      throw new ResourceNotFoundException({
        message: 'The specified log stream does not exist.',
        $metadata: { httpStatusCode: 400 },
      });
    return {
      events: lines.slice(-input.limit).map((message, i) => ({
        timestamp: 1_767_225_600_000 + i,
        message: `${message}\n`,
        ingestionTime: 1_767_225_601_000 + i,
      })),
      nextForwardToken: 'f/1',
      nextBackwardToken: 'b/1',
    };
  });
});

function images(clients: { codebuild?: boolean; logs?: boolean } = { codebuild: true, logs: true }) {
  return new CodeBuildImages({
    ...(clients.codebuild ? { codebuild: codebuildClient } : {}),
    ecr: ecrClient,
    ...(clients.logs ? { logs: logsClient } : {}),
    project: 'preview-images',
    repositoryUri: REPOSITORY_URI,
    artifactsBucket: 'preview-artifacts',
    complete: async (token, outcome) => void completed.push({ token, outcome }),
    logGroup: '/aws/codebuild/preview-images',
  });
}

/** The terminal event CodeBuild would emit for the build started last. */
function finished(status: string, buildRef: string): BuildStateChange {
  return {
    'build-status': status,
    'build-id': 'arn:aws:codebuild:eu-west-1:000000000000:build/preview-images:build-1',
    'project-name': 'preview-images',
    'additional-information': {
      environment: { 'environment-variables': [{ name: BUILD_REF_VAR, value: buildRef, type: 'PLAINTEXT' }] },
      logs: { 'group-name': '/aws/codebuild/preview-images', 'stream-name': 'build-1' },
    },
  };
}

const apps = { web: { port: 3000 }, api: { port: 8080, dockerfile: 'api/Dockerfile', context: 'api' } };

/** The tag of an app's image by its build identity at SHA (no recorded inputs: identified by the commit). */
const tagOf = (rt: CodeBuildImages, app: 'web' | 'api') =>
  rt.tagOf(target, app, rt.identityOf(apps[app], SHA, undefined, app));

/** App → tag of the build started last (its BUILDS): what a forced build pushes. */
function startedTags(): Record<string, string> {
  const start = codebuild.commandCalls(StartBuildCommand).at(-1)!.args[0].input;
  const builds = start.environmentVariablesOverride!.find((v) => v.name === 'BUILDS')!.value!;
  return Object.fromEntries(
    (JSON.parse(builds) as { app: string; tag: string }[]).map((b) => [b.app, b.tag]),
  );
}

describe('CodeBuildImages.build', () => {
  test('asks ECR for the tags, starts one build of the missing apps, records its id and log stream', async () => {
    const rt = images({ codebuild: true });
    const webTag = tagOf(rt, 'web');
    const apiTag = tagOf(rt, 'api');
    pushed.set(webTag, `sha256:${'1'.repeat(64)}`);

    await rt.build(target, SHA, apps, 'token-1');

    expect(ecr.calls()).toHaveLength(1);
    expect(ecr.commandCalls(BatchGetImageCommand).map((c) => c.args[0].input)).toEqual([
      {
        repositoryName: 'preview-apps',
        imageIds: [{ imageTag: webTag }, { imageTag: apiTag }],
        acceptedMediaTypes: [
          'application/vnd.docker.distribution.manifest.v2+json',
          'application/vnd.oci.image.manifest.v1+json',
          'application/vnd.oci.image.index.v1+json',
          'application/vnd.docker.distribution.manifest.list.v2+json',
        ],
      },
    ]);
    expect(codebuild.calls()).toHaveLength(1);
    const [start] = codebuild.commandCalls(StartBuildCommand).map((c) => c.args[0].input);
    const buildRef = start!.idempotencyToken as string;
    expect(start).toEqual({
      projectName: 'preview-images',
      idempotencyToken: buildRef,
      environmentVariablesOverride: [
        { name: BUILD_REF_VAR, value: buildRef, type: 'PLAINTEXT' },
        { name: 'SOURCE_BUCKET', value: 'preview-artifacts', type: 'PLAINTEXT' },
        { name: 'SOURCE_KEY', value: `sources/o1/acme/shop/${SHA}.tar.gz`, type: 'PLAINTEXT' },
        { name: 'IMAGE_REPOSITORY_URI', value: REPOSITORY_URI, type: 'PLAINTEXT' },
        {
          name: 'BUILDS',
          value: JSON.stringify([
            {
              app: 'api',
              dockerfile: 'api/Dockerfile',
              context: 'api',
              tag: apiTag,
              commit: SHA,
              buildArgs: {},
              cache: `buildcache-${rt.scopeOf(target, 'api')}`,
            },
          ]),
          type: 'PLAINTEXT',
        },
      ],
    });
    expect(completed).toEqual([]); // the completion event ends the task

    const { Item: record } = await ddb().send(
      new GetCommand({ TableName: table('builds'), Key: { buildId: buildRef } }),
    );
    expect(record).toMatchObject({
      taskToken: 'token-1',
      codebuildId: 'preview-images:build-1',
      tags: { api: apiTag },
      reused: { web: `${REPOSITORY_URI}@sha256:${'1'.repeat(64)}` },
    });
    const { Item: pointer } = await ddb().send(
      new GetCommand({
        TableName: table('builds'),
        Key: { buildId: keys.builds.latestLog(target.orgId, target.envKey, 'api') },
      }),
    );
    expect(pointer).toMatchObject({
      codebuildId: 'preview-images:build-1',
      logGroup: '/aws/codebuild/preview-images',
      logStream: 'build-1',
    });
  });

  test('every image exists: no build, the task ends with them', async () => {
    const rt = images({ codebuild: true });
    pushed.set(tagOf(rt, 'web'), 'sha256:w');
    pushed.set(tagOf(rt, 'api'), 'sha256:a');
    await rt.build(target, SHA, apps, 'token-2');
    expect(codebuild.calls()).toEqual([]);
    expect(completed).toEqual([
      {
        token: 'token-2',
        outcome: {
          ok: true,
          output: {
            images: { web: `${REPOSITORY_URI}@sha256:w`, api: `${REPOSITORY_URI}@sha256:a` },
            builds: {
              web: { result: 'reused', commit: BUILT_FROM },
              api: { result: 'reused', commit: BUILT_FROM },
            },
          },
        },
      },
    ]);
  });

  test('a generation no longer current: Superseded, no build started, nothing recorded, no task ended', async () => {
    const rt = images({ codebuild: true });
    const asked: number[] = [];
    const current = async () => {
      asked.push(target.generation);
      return false;
    };
    const err = await rt.build(target, SHA, apps, 'token-old', { current }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      name: 'Superseded',
      message: 'generation 3 superseded: no image build started',
    });
    expect(asked).toEqual([3]);
    expect(codebuild.calls()).toEqual([]);
    expect(completed).toEqual([]);
    // Every image built already: the task is not ended with them either.
    pushed.set(tagOf(rt, 'web'), 'sha256:w');
    pushed.set(tagOf(rt, 'api'), 'sha256:a');
    await expect(rt.build(target, SHA, apps, 'token-old', { current })).rejects.toMatchObject({
      name: 'Superseded',
    });
    expect(completed).toEqual([]);
    // Still current: the build starts.
    await rt.build(target, SHA, apps, 'token-new', { rebuild: true, current: async () => true });
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
  });

  test('an error of CodeBuild reaches the caller as the SDK raised it', async () => {
    const refused = new AccountLimitExceededException({
      message: 'Cannot have more than 60 builds',
      $metadata: { httpStatusCode: 400, requestId: 'req-1' },
    });
    codebuild.on(StartBuildCommand).rejects(refused);
    const err = await images({ codebuild: true })
      .build(target, SHA, apps, 't', { rebuild: true })
      .catch((e: unknown) => e);
    expect(err).toBe(refused);
    expect(err).toMatchObject({ name: 'AccountLimitExceededException', $fault: 'client' });
    expect(ecr.calls()).toEqual([]); // rebuild: no lookup
  });
});

describe('CodeBuildImages.onBuildFinished', () => {
  async function started(rt: CodeBuildImages, token: string): Promise<string> {
    await rt.build(target, SHA, apps, token, { rebuild: true });
    return codebuild
      .commandCalls(StartBuildCommand)
      .map((c) => c.args[0].input)
      .at(-1)!.idempotencyToken as string;
  }

  test('a success ends the task with the pushed images; a redelivery is ignored', async () => {
    const rt = images();
    const ref = await started(rt, 'token-3');
    const tags = startedTags();
    // A forced build's tags are its own: the identity's tag plus a build number.
    expect(tags.web).toMatch(new RegExp(`^${tagOf(rt, 'web')}-b\\d+$`));
    pushed.set(tags.web!, 'sha256:w');
    pushed.set(tags.api!, 'sha256:a');
    expect(await rt.onBuildFinished(finished('SUCCEEDED', ref))).toBe('completed');
    expect(completed).toEqual([
      {
        token: 'token-3',
        outcome: {
          ok: true,
          output: {
            images: { web: `${REPOSITORY_URI}@sha256:w`, api: `${REPOSITORY_URI}@sha256:a` },
            builds: { web: { result: 'built', commit: SHA }, api: { result: 'built', commit: SHA } },
          },
        },
      },
    ]);
    expect(logs.calls()).toEqual([]);
    expect(await rt.onBuildFinished(finished('SUCCEEDED', ref))).toBe('ignored');
  });

  test('a build whose generation was superseded while it ran ends its task Superseded, whatever it did', async () => {
    const rt = images();
    const ref = await started(rt, 'token-s');
    pushed.set(startedTags().web!, 'sha256:w');
    pushed.set(startedTags().api!, 'sha256:a');
    const asked: unknown[] = [];
    const current = async (r: { orgId: string; envKey: string; generation: number }) => {
      asked.push(r);
      return false;
    };
    expect(await rt.onBuildFinished(finished('SUCCEEDED', ref), { current })).toBe('completed');
    expect(asked).toEqual([expect.objectContaining({ orgId: 'o1', envKey: 'acme/shop#7', generation: 3 })]);
    expect(completed).toEqual([
      {
        token: 'token-s',
        outcome: {
          ok: false,
          error: 'Superseded',
          cause: 'generation 3 was superseded while its image build ran',
        },
      },
    ]);
    expect(ecr.commandCalls(BatchGetImageCommand)).toHaveLength(0); // the images were not even looked up
  });

  test('a delivery that fails before the task ends keeps the token: the retry of the event ends it', async () => {
    // Step Functions refuses the first SendTaskSuccess (past the client's retries): Lambda retries the event.
    let refusals = 1;
    const rt = new CodeBuildImages({
      codebuild: codebuildClient,
      ecr: ecrClient,
      logs: logsClient,
      project: 'preview-images',
      repositoryUri: REPOSITORY_URI,
      artifactsBucket: 'preview-artifacts',
      complete: async (token, outcome) => {
        if (refusals-- > 0) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
        completed.push({ token, outcome });
      },
    });
    const ref = await started(rt, 'token-retry');
    pushed.set(startedTags().web!, 'sha256:w');
    pushed.set(startedTags().api!, 'sha256:a');
    await expect(rt.onBuildFinished(finished('SUCCEEDED', ref))).rejects.toThrow('Rate exceeded');
    expect(completed).toEqual([]);
    // The retry finds the record and ends the task; a redelivery after that does nothing.
    expect(await rt.onBuildFinished(finished('SUCCEEDED', ref))).toBe('completed');
    expect(completed).toEqual([
      {
        token: 'token-retry',
        outcome: {
          ok: true,
          output: {
            images: { web: `${REPOSITORY_URI}@sha256:w`, api: `${REPOSITORY_URI}@sha256:a` },
            builds: { web: { result: 'built', commit: SHA }, api: { result: 'built', commit: SHA } },
          },
        },
      },
    ]);
    expect(await rt.onBuildFinished(finished('SUCCEEDED', ref))).toBe('ignored');
    expect(completed).toHaveLength(1);
  });

  test("the completion events' handler goes without the artifacts bucket (its function is not given it)", async () => {
    const rt = images();
    const ref = await started(rt, 'token-nobucket');
    pushed.set(startedTags().web!, 'sha256:w');
    pushed.set(startedTags().api!, 'sha256:a');
    const finisher = new CodeBuildImages({
      ecr: ecrClient,
      logs: logsClient,
      project: 'preview-images',
      repositoryUri: REPOSITORY_URI,
      complete: async (token, outcome) => void completed.push({ token, outcome }),
    });
    expect(await finisher.onBuildFinished(finished('SUCCEEDED', ref))).toBe('completed');
    expect(completed.map((c) => c.token)).toEqual(['token-nobucket']);
    // Starting a build does need it, and says so before anything is written.
    const starter = new CodeBuildImages({
      codebuild: codebuildClient,
      ecr: ecrClient,
      project: 'preview-images',
      repositoryUri: REPOSITORY_URI,
      complete: async () => undefined,
    });
    const before = codebuild.calls().length;
    await expect(starter.build(target, SHA, apps, 'token-x', { rebuild: true })).rejects.toThrow(
      /^ARTIFACTS_BUCKET is not set/,
    );
    expect(codebuild.calls().length).toBe(before);
  });

  test('a failure ends the task with the cause its log names, read with GetLogEvents', async () => {
    const rt = images();
    const ref = await started(rt, 'token-4');
    streams.set('/aws/codebuild/preview-images/build-1', [
      '[Container] 2026/11/28 15:00:00.000000 Running command bash "$PREVIEW_WORK_DIR/build.sh"',
      'Step 3/4 : RUN node build.js',
      "Error: Cannot find module './missing-config.json'",
      '------',
      '   3 | >>> RUN node build.js',
      'PREVIEW-BUILD-FAILED app=api: docker build exited 1',
      '[Container] 2026/11/28 15:00:01.000000 Phase context status code: COMMAND_EXECUTION_ERROR Message: Error while executing command: bash "$PREVIEW_WORK_DIR/build.sh". Reason: exit status 1',
    ]);
    expect(await rt.onBuildFinished(finished('FAILED', ref))).toBe('completed');
    expect(logs.calls()).toHaveLength(1);
    expect(logs.commandCalls(GetLogEventsCommand).map((c) => c.args[0].input)).toEqual([
      {
        logGroupName: '/aws/codebuild/preview-images',
        logStreamName: 'build-1',
        limit: 300,
        startFromHead: false,
      },
    ]);
    expect(completed).toEqual([
      {
        token: 'token-4',
        outcome: {
          ok: false,
          error: 'DeployFailed',
          cause: expect.stringMatching(
            /^Error: Cannot find module '\.\/missing-config\.json' \(image build failed for web, api: app api: docker build exited 1\); last output: Step 3\/4 : RUN node build\.js \| Error: Cannot find module '\.\/missing-config\.json'; full log: previewctl envs logs api .*, or CloudWatch Logs \/aws\/codebuild\/preview-images \/ build-1$/,
          ),
        },
      },
    ]);
  });

  test("a failure's quoted output reads [secret] for every value its apps' secrets hold", async () => {
    const rt = images();
    const ref = await started(rt, 'token-6');
    const secret = 'db-password-4c1d';
    streams.set('/aws/codebuild/preview-images/build-1', [
      `Error: could not connect to postgres://app:${secret}@db/app`,
      `PREVIEW-BUILD-FAILED app=web: process "/bin/sh -c node seed.js ${secret}" did not complete successfully`,
    ]);
    const asked: unknown[] = [];
    const secretValues = async (scope: { orgId: string; envKey: string }, apps: string[]) => {
      asked.push({ orgId: scope.orgId, envKey: scope.envKey, apps });
      return [secret];
    };
    expect(await rt.onBuildFinished(finished('FAILED', ref), { secretValues })).toBe('completed');
    expect(asked).toEqual([{ orgId: 'o1', envKey: 'acme/shop#7', apps: ['web', 'api'] }]);
    const cause = (completed[0]!.outcome as { cause: string }).cause;
    expect(cause).toContain('postgres://app:[secret]@db/app');
    expect(cause).toContain('app web: process "/bin/sh -c node seed.js [secret]" did not complete');
    expect(cause).not.toContain(secret);
  });

  test('a failure whose log cannot be read still ends the task, saying where the log is', async () => {
    const rt = images();
    const ref = await started(rt, 'token-5');
    // No such stream: GetLogEvents answers ResourceNotFoundException.
    expect(await rt.onBuildFinished(finished('FAILED', ref))).toBe('completed');
    expect(logs.calls()).toHaveLength(1);
    expect(completed[0]!.outcome).toMatchObject({
      ok: false,
      error: 'DeployFailed',
      cause: expect.stringContaining('CloudWatch Logs /aws/codebuild/preview-images / build-1'),
    });
  });
});

describe('BuildLogs', () => {
  const query = { source: 'build' as const, tailLines: 2, maxBytes: 1000 };
  const pointTo = (app: string, logStream: string) =>
    ddb().send(
      new PutCommand({
        TableName: table('builds'),
        Item: {
          buildId: keys.builds.latestLog(target.orgId, target.envKey, app),
          logGroup: '/aws/codebuild/preview-images',
          logStream,
          expiresAt: Math.floor(Date.now() / 1000) + 3600,
        },
      }),
    );

  test("the last lines of an app's latest build log, newest events first asked for", async () => {
    await pointTo('web', 'stream-web');
    streams.set('/aws/codebuild/preview-images/stream-web', ['one', 'two', 'three']);
    const reader = new BuildLogs(logsClient);
    expect(await reader.logs(target, 'web', query)).toEqual({ text: 'two\nthree\n', truncated: true });
    expect(logs.calls()).toHaveLength(1);
    expect(logs.commandCalls(GetLogEventsCommand).map((c) => c.args[0].input)).toEqual([
      {
        logGroupName: '/aws/codebuild/preview-images',
        logStreamName: 'stream-web',
        limit: 102, // the lines wanted and room for CodeBuild's own
        startFromHead: false,
      },
    ]);
  });

  test("CodeBuild's own [Container] lines are not the build's output: the tail is the build's lines", async () => {
    await pointTo('web', 'stream-web');
    streams.set('/aws/codebuild/preview-images/stream-web', [
      '[Container] 2026/11/28 17:50:01.1 Running command bash "$PREVIEW_WORK_DIR/build.sh"',
      '#12 [3/4] RUN node build.js',
      '#12 0.41 Error: Cannot find module ./missing',
      'PREVIEW-BUILD-FAILED app=web: process "/bin/sh -c node build.js" did not complete successfully',
      '[Container] 2026/11/28 17:50:09.2 Command did not exit successfully bash "$PREVIEW_WORK_DIR/build.sh" exit status 1',
      '[Container] 2026/11/28 17:50:09.3 Phase complete: BUILD State: FAILED',
      '[Container] 2026/11/28 17:50:09.3 Phase context status code: COMMAND_EXECUTION_ERROR Message: Error while executing command',
    ]);
    const reader = new BuildLogs(logsClient);
    expect(await reader.logs(target, 'web', query)).toEqual({
      text:
        '#12 0.41 Error: Cannot find module ./missing\n' +
        'PREVIEW-BUILD-FAILED app=web: process "/bin/sh -c node build.js" did not complete successfully\n',
      truncated: true,
    });
    expect(await reader.logs(target, 'web', { ...query, tailLines: 10 })).toEqual({
      text:
        '#12 [3/4] RUN node build.js\n#12 0.41 Error: Cannot find module ./missing\n' +
        'PREVIEW-BUILD-FAILED app=web: process "/bin/sh -c node build.js" did not complete successfully\n',
      truncated: false,
    });
  });

  test('no pointer: undefined without a call; a stream that is gone (ResourceNotFoundException): undefined', async () => {
    const reader = new BuildLogs(logsClient);
    expect(await reader.logs(target, 'nothing', query)).toBeUndefined();
    expect(logs.calls()).toEqual([]);
    await pointTo('gone', 'stream-gone');
    expect(await reader.logs(target, 'gone', query)).toBeUndefined();
    expect(logs.calls()).toHaveLength(1);
  });

  test('any other error reaches the caller by its code', async () => {
    await pointTo('web', 'stream-web');
    logs.on(GetLogEventsCommand).rejects(
      new CloudWatchLogsServiceException({
        name: 'AccessDeniedException',
        message: 'not authorized to perform: logs:GetLogEvents',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
      }),
    );
    const reader = new BuildLogs(logsClient);
    await expect(reader.logs(target, 'web', query)).rejects.toMatchObject({
      name: 'AccessDeniedException',
      $fault: 'client',
    });
  });
});
