import { LambdaClient } from '@aws-sdk/client-lambda';
import { describe, expect, test } from '@jest/globals';
import type { FaultReason } from '../../../../test/cloud/fakes/kubernetes/index.js';
import {
  API,
  at,
  aws,
  CREDENTIALS,
  cluster,
  IMAGE2,
  kube,
  launch,
  newToken,
  nextPr,
  outcomeOf,
  outcomes,
  REGION,
  ready,
  SECRET,
  TICK_MS,
  target,
  until,
  useFakeCluster,
  WEB,
} from '../../../../test/support/eks-cluster.js';
import type { RolloutWatchEvent } from './cluster.js';
import { namespaceName } from './objects.js';

/*
 * The EKS cluster adapter's rollouts (test/support/eks-cluster.ts has the fake cluster): superseded by a
 * teardown or a newer deploy, failed with the cause and masked logs, timed out; the watcher re-invoking
 * itself through a real LambdaClient against a fake Lambda Invoke, its task heartbeats, and its Lambda.
 */

useFakeCluster();

describe('EksCluster', () => {
  test('teardown during a rollout wins: the waiting token ends Superseded', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    kube.autoAdvance(0);
    let tearing: Promise<void> | undefined;
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      const token = newToken();
      await c.awaitReady(t, { web: WEB }, token);
      tearing = c.teardown(at(t, 2));
      const outcome = await outcomeOf(token);
      expect(outcome).toMatchObject({ ok: false, error: 'Superseded' });
    } finally {
      kube.autoAdvance(TICK_MS);
    }
    await tearing;
    expect(kube.get('namespaces', '', ns)).toBeUndefined();
  });

  test('a newer deploy supersedes the watch of an older one', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    kube.autoAdvance(0);
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      const token = newToken();
      await c.awaitReady(t, { web: WEB }, token);
      await c.deploy(at(t, 2), [launch('web', WEB, SECRET, IMAGE2)]);
      expect(await outcomeOf(token)).toMatchObject({ ok: false, error: 'Superseded' });
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  const failures: [FaultReason, RegExp, boolean][] = [
    ['CrashLoopBackOff', /back-off 40s restarting failed container/, true],
    ['ImagePullBackOff', /Back-off pulling image/, false],
    ['ErrImagePull', /failed to pull and unpack image/, false],
    ['CreateContainerConfigError', /couldn't find key/, false],
    ['ProgressDeadlineExceeded', /has timed out progressing/, true],
  ];
  test.each(failures)(
    '%s fails the token with DeployFailed naming the app, the cause and masked logs',
    async (reason, message, logs) => {
      nextPr();
      const c = cluster();
      const t = target(1);
      const ns = namespaceName(t);
      kube.setLogs(ns, 'api', ['booting', `connecting with password ${SECRET}`, 'fatal: cannot connect']);
      kube.inject(ns, 'api', reason);
      await c.deploy(t, [launch('web', WEB), launch('api', API)], { prune: true });
      const outcome = await ready(c, t, { web: WEB, api: API });
      expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
      const cause = (outcome as { cause: string }).cause;
      // A log that names a cause (`fatal: …`) leads the message; else what the pod waits for does.
      expect(cause).toMatch(new RegExp(`^${logs ? 'fatal: cannot connect \\(' : ''}app api: ${reason} \\(`));
      expect(cause).toMatch(/; full log: previewctl envs logs api --repo [^ ]+ --pr \d+$/);
      expect(cause).toMatch(message);
      expect(cause).not.toContain(SECRET);
      expect(cause).not.toMatch(/app web/);
      expect(cause).not.toContain('last output');
      kube.clear(ns, 'api');
    },
  );

  test('a missing secret bundle is a CreateContainerConfigError from the controller itself', async () => {
    nextPr();
    const c = cluster();
    const t = target(1);
    const ns = namespaceName(t);
    await c.deploy(t, [launch('web', WEB)], { prune: true });
    kube.autoAdvance(0);
    try {
      // Simulate the Secret going missing (deleted by hand) and a restart of the pods.
      await c.deploy(at(t, 2), [launch('web', WEB)], { restart: true });
      const secret = kube.get('secrets', ns, 'web')!;
      kube.drop('secrets', ns, 'web');
      const outcome = ready(c, at(t, 2), { web: WEB });
      kube.autoAdvance(TICK_MS);
      expect(await outcome).toMatchObject({
        ok: false,
        error: 'DeployFailed',
        cause: expect.stringContaining('app web: CreateContainerConfigError (secret "web" not found)'),
      });
      expect(secret).toBeDefined();
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  test('a rollout that is not ready by the deadline fails with what was pending', async () => {
    nextPr();
    const c = cluster({ timing: { pollMs: 25, readyTimeoutMs: 1000 } });
    const t = target(1);
    kube.autoAdvance(0);
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      const outcome = await ready(c, t, { web: WEB });
      expect(outcome).toMatchObject({ ok: false, error: 'DeployFailed' });
      expect((outcome as { cause: string }).cause).toMatch(
        /^not ready within 1 s: web: waiting for the controller/,
      );
    } finally {
      kube.autoAdvance(TICK_MS);
    }
  });

  test('the watcher invokes itself (Lambda, InvocationType Event) after its slice, until the rollout is ready', async () => {
    nextPr();
    const events: RolloutWatchEvent[] = [];
    const c = cluster({
      invokeWatcher: undefined,
      lambda: new LambdaClient({ region: REGION, endpoint: aws.url, credentials: CREDENTIALS }),
      watcherFunction: `arn:aws:lambda:${REGION}:000000000000:function:rollout-watcher`,
      timing: { pollMs: 25, sliceMs: 100, readyTimeoutMs: 20_000 },
    });
    aws.addFunction('rollout-watcher', async (event) => {
      events.push(event as RolloutWatchEvent);
      return c.watch(event as RolloutWatchEvent);
    });
    const t = target(1);
    kube.autoAdvance(0);
    const token = newToken();
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      await c.awaitReady(t, { web: WEB }, token);
      await until(() => events.length >= 3);
    } finally {
      kube.autoAdvance(TICK_MS);
    }
    expect(await outcomeOf(token)).toMatchObject({ ok: true, output: { urls: { web: expect.any(String) } } });
    await aws.settled();
    expect(events.length).toBeGreaterThanOrEqual(3);
    expect(events.map((e) => e.hop)).toEqual(events.map((_, i) => i));
    expect(new Set(events.map((e) => e.deadline)).size).toBe(1);
    expect(JSON.stringify(events)).not.toContain(SECRET);
    expect(aws.calls.filter((call) => call === 'Lambda.Invoke rollout-watcher (Event)').length).toBe(
      events.length,
    );
  });

  test('the watcher sends task heartbeats as it waits; a task that no longer waits stops it', async () => {
    nextPr();
    const beats: string[] = [];
    const c = cluster({
      heartbeat: async (token) => {
        beats.push(token);
        return undefined;
      },
      timing: { pollMs: 25, heartbeatMs: 60, readyTimeoutMs: 20_000 },
    });
    const t = target(1);
    const token = newToken();
    kube.autoAdvance(0);
    try {
      await c.deploy(t, [launch('web', WEB)], { prune: true });
      await c.awaitReady(t, { web: WEB }, token);
      await until(() => beats.length >= 3);
    } finally {
      kube.autoAdvance(TICK_MS);
    }
    expect(await outcomeOf(token)).toMatchObject({ ok: true });
    expect(beats.length).toBeGreaterThanOrEqual(3);
    expect(new Set(beats)).toEqual(new Set([token]));

    const gone = cluster({ heartbeat: async () => 'gone' as const });
    const lost = newToken();
    const now = Date.now();
    const event = { target: t, apps: ['web'], token: lost, deadline: now + 10_000, hop: 0, startedAt: now };
    expect(await gone.watch(event)).toEqual({ outcome: 'abandoned', hop: 0 });
    expect(outcomes.has(lost)).toBe(false);
  });
});

describe('the rollout watcher Lambda', () => {
  test('refuses an event it cannot read', async () => {
    const { handler } = await import('../../../watchers/rollout.js');
    await expect(handler({ target: {} })).rejects.toMatchObject({ name: 'MalformedEvent' });
  });
});
