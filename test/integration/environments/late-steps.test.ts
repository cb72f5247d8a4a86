import { beforeAll, describe, expect, test } from '@jest/globals';
import { findEnvironment } from '../../../functions/core/environments/lifecycle.js';
import { type StepInput, transition } from '../../../functions/core/environments/pipeline.js';
import type { RuntimeTarget } from '../../../functions/ports/runtime/port.js';
import { handler as buildImages } from '../../../functions/steps/build-images.js';
import { handler as deployApps } from '../../../functions/steps/deploy-apps.js';
import { handler as fetchSource } from '../../../functions/steps/fetch-source.js';
import { handler as markFailed } from '../../../functions/steps/mark-failed.js';
import { handler as markReady } from '../../../functions/steps/mark-ready.js';
import { handler as readConfig } from '../../../functions/steps/read-config.js';
import { handler as tearDown } from '../../../functions/steps/tear-down.js';
import { bearer, call, linkRepo } from '../../support/api.js';
import { hit, pollUntil, SERVER_JS } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * Generation fencing from the outside: once a newer deploy owns an environment, every step of the older
 * execution (invoked here directly, as a late or retried Lambda invocation would be) is refused, and
 * neither the stored environment nor the running app changes.
 */

const h = localServerForFile();
let auth: Record<string, string>;

const REPO = 'acme/late';
const PR = 3;
const ENV_KEY = `${REPO}#${PR}`;
const PATH = `/v1/preview/environments/${REPO}/${PR}`;
const PREVIEW_YAML = 'apps:\n  web:\n    port: 3000\n    command: node server.js web\n    health: /healthz\n';

beforeAll(() => {
  auth = bearer(h.org);
});

async function deploy(sha: string) {
  await linkRepo(h.org, REPO);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: REPO, prNumber: PR, headSha: sha, headRef: 'feature' },
    headers: auth,
  });
  expect(res.status).toBe(202);
}

describe('a late step of a superseded execution', () => {
  test('is refused (Superseded, or a quiet no-op for mark-failed) and changes nothing', async () => {
    const orgId = h.org.orgId;
    const v1 = makeRepo(h.gitRoot, REPO, {
      'preview.yaml': PREVIEW_YAML,
      'server.js': SERVER_JS,
      VERSION: 'v1',
    });
    await deploy(v1);
    await pollUntil(h, h.org, PATH, (s) => s.status === 'ready' && s.lastDeployedSha === v1);
    const older = (await findEnvironment(orgId, ENV_KEY))!;

    const v2 = commitFiles(h.gitRoot, REPO, { VERSION: 'v2' });
    await deploy(v2);
    await h.service.workflows.idle();
    await pollUntil(h, h.org, PATH, (s) => s.status === 'ready' && s.lastDeployedSha === v2);
    const current = (await findEnvironment(orgId, ENV_KEY))!;
    expect(current.generation).toBe(older.generation + 1);
    const url = current.urls.web!;
    const app = await hit(url);
    expect(app).toMatchObject({ app: 'web', version: 'v2', pid: expect.any(Number) });

    const old: StepInput = { orgId, envKey: ENV_KEY, generation: older.generation };
    const superseded = { name: 'Superseded' };
    await expect(fetchSource(old)).rejects.toMatchObject(superseded);
    await expect(readConfig(old)).rejects.toMatchObject(superseded);
    await expect(buildImages({ input: old, taskToken: 'late-build-token' })).rejects.toMatchObject(
      superseded,
    );
    await expect(deployApps({ input: old, taskToken: 'late-deploy-token' })).rejects.toMatchObject(
      superseded,
    );
    await expect(markReady({ ...old, ready: { urls: { web: 'http://127.0.0.1:1' } } })).rejects.toMatchObject(
      superseded,
    );
    await expect(tearDown(old)).rejects.toMatchObject(superseded);
    // The Catch target ends quietly: the execution must not fail over a write it may not make.
    const failure = { Error: 'DeployFailed', Cause: 'a late failure of the old generation' };
    await expect(markFailed({ ...old, failure })).resolves.toEqual({ ...old, failure });

    // Past the step's own check, the write itself is conditional on the generation ...
    await expect(transition(old, { status: 'failed', error: 'late', urls: {} })).rejects.toMatchObject(
      superseded,
    );
    // ... and the runtime refuses the old generation too.
    const target: RuntimeTarget = {
      orgId,
      envKey: ENV_KEY,
      repoFullName: REPO,
      prNumber: PR,
      generation: older.generation,
    };
    const runtime = h.service.runtime;
    const spec = current.appSpecs!.web!;
    await expect(runtime.build(target, v1, { web: spec }, 'late-build-token')).rejects.toMatchObject(
      superseded,
    );
    await expect(
      runtime.deploy(target, [{ name: 'web', spec, vars: {}, secretKeys: [] }], { prune: true }),
    ).rejects.toMatchObject(superseded);
    await expect(runtime.awaitReady(target, { web: spec }, 'late-ready-token')).rejects.toMatchObject(
      superseded,
    );
    await expect(runtime.teardown(target)).rejects.toMatchObject(superseded);
    await expect(runtime.stopApps(target, 'the environment failed')).rejects.toMatchObject(superseded);

    await h.service.workflows.idle();
    expect(await findEnvironment(orgId, ENV_KEY)).toEqual(current); // status, urls, SHA, updatedAt, generation…
    expect(await hit(url)).toEqual(app); // the same process (pid) of the same build
    const status = await call(h, 'GET', PATH, { headers: auth });
    expect(status.body).toMatchObject({ status: 'ready', lastDeployedSha: v2, urls: { web: url } });
  }, 60_000);
});
