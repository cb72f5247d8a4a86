import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { tableNames, tables } from '../manifest/tables.js';
import {
  appLogReader,
  appRunner,
  appTeardown,
  buildLogs,
  imageBuilder,
  imageBuilds,
  runtime,
} from './registry.js';
import { CloudRuntime } from './runtime/cloud.js';
import { BuildLogs } from './runtime/codebuild/build-logs.js';
import { CodeBuildImages } from './runtime/codebuild/images.js';

// AWS mode: the runtime is images on CodeBuild plus a cluster; until the cluster adapter exists, a deploy
// fails saying so (a clear error, never a 500) and a teardown has nothing to remove.
const vars: Record<string, string> = {
  PREVIEW_MODE: 'aws',
  AWS_REGION: 'eu-west-1',
  ARTIFACTS_BUCKET: 'b',
  IMAGE_BUILD_PROJECT: 'p',
  IMAGE_REPOSITORY_URI: '000000000000.dkr.ecr.eu-west-1.amazonaws.com/r',
  ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
};
const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
beforeAll(() => {
  Object.assign(process.env, vars);
});
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

describe('the registry in aws mode', () => {
  const target = { orgId: 'o', envKey: 'acme/shop#1', repoFullName: 'acme/shop', prNumber: 1, generation: 1 };

  test('the runtime is the cloud runtime, built once per container', () => {
    expect(runtime()).toBeInstanceOf(CloudRuntime);
    expect(runtime()).toBe(runtime());
  });

  test('without a cluster adapter a deploy fails saying so, and a teardown has nothing to do', async () => {
    await expect(runtime().deploy(target, [])).rejects.toMatchObject({
      name: 'DeployFailed',
      message: expect.stringMatching(/no EKS cluster is configured to run them/),
    });
    await expect(runtime().teardown(target)).resolves.toBeUndefined();
  });
});

describe('the per-port getters in aws mode', () => {
  test('the build step and the build events get CodeBuild images of their own (one per container)', () => {
    const rt = runtime() as CloudRuntime;
    expect(imageBuilder()).toBeInstanceOf(CodeBuildImages);
    expect(imageBuilds()).toBeInstanceOf(CodeBuildImages);
    expect(imageBuilder()).toBe(imageBuilder());
    expect(imageBuilds()).toBe(imageBuilds());
    expect(rt.images).toBeInstanceOf(CodeBuildImages);
  });

  test('the build events’ images carry no CodeBuild client: starting a build there is a ConfigError', async () => {
    const target = {
      orgId: 'o',
      envKey: 'acme/shop#3',
      repoFullName: 'acme/shop',
      prNumber: 3,
      generation: 1,
    };
    await expect(
      imageBuilds().build(target, 'a'.repeat(40), { web: { port: 3000 } }, 'token', { rebuild: true }),
    ).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining('without a codebuild client'),
    });
  });
});

describe('the narrow runtime getters of the Lambda handlers in aws mode (no cluster configured)', () => {
  const target = { orgId: 'o', envKey: 'acme/shop#2', repoFullName: 'acme/shop', prNumber: 2, generation: 1 };

  test('DeployApps: a deploy or a readiness wait fails saying no cluster is configured', async () => {
    await expect(appRunner().deploy(target, [])).rejects.toMatchObject({
      name: 'DeployFailed',
      message: expect.stringMatching(/no EKS cluster is configured to run them/),
    });
    await expect(appRunner().awaitReady(target, {}, 'token')).rejects.toMatchObject({
      name: 'DeployFailed',
    });
    expect(appRunner()).toBe(appRunner());
  });

  test('TearDown: nothing to remove', async () => {
    await expect(appTeardown().teardown(target)).resolves.toBeUndefined();
    expect(appTeardown()).toBe(appTeardown());
  });

  test('the app-logs route: no pods without a cluster; build logs through the CloudWatch Logs reader alone', async () => {
    expect(buildLogs()).toBeInstanceOf(BuildLogs);
    expect(buildLogs()).toBe(buildLogs());
    const query = { tailLines: 10, maxBytes: 1000 };
    await expect(appLogReader().logs(target, 'web', { source: 'app', ...query })).resolves.toBeUndefined();
  });
});
