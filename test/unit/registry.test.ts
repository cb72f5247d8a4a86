import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { tableNames, tables } from '../../functions/manifest/tables.js';
import { buildRuntime, imageBuilds, runtime } from '../../functions/ports/registry.js';
import { CloudRuntime } from '../../functions/ports/runtime/cloud.js';

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
  test('the build step and the build events use the cloud runtime’s own CodeBuild images (one per container)', () => {
    const rt = runtime() as CloudRuntime;
    expect(buildRuntime()).toBe(rt.images);
    expect(imageBuilds()).toBe(rt.images);
  });
});
