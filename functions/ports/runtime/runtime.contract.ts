import { describe, expect, test } from '@jest/globals';
import type { TaskOutcome } from '../workflows/port.js';
import type { AppSpec, Runtime, RuntimeTarget } from './port.js';

/** What an adapter's test file hands the contract: a runtime and the means to watch its task tokens. */
export interface RuntimeFixture {
  runtime(): Runtime;
  /** A fresh task token, and how it was completed (the fixture plays `Workflows.completeTask`). */
  newToken(): string;
  outcomeOf(token: string): Promise<TaskOutcome>;
  /** A fresh environment (its own PR) at `generation`. */
  target(generation?: number): RuntimeTarget;
  /** The head commit of the fixture repository, and an app of it that answers its health check. */
  sha(): string;
  app: AppSpec;
}

/**
 * The Runtime contract, run by each adapter's test file against that adapter: callbacks complete their
 * tokens, readiness yields a URL per app, generations fence, teardown fences too (and pruning its fences
 * lifts none that still guards), logs exist once their output does.
 */
export function runtimeContract(name: string, fx: RuntimeFixture): void {
  const at = (t: RuntimeTarget, generation: number): RuntimeTarget => ({ ...t, generation });
  const launch = (vars: Record<string, string> = {}) => [{ name: 'web', spec: fx.app, vars, secretKeys: [] }];
  async function build(rt: Runtime, t: RuntimeTarget) {
    const token = fx.newToken();
    await rt.build(t, fx.sha(), { web: fx.app }, token);
    return fx.outcomeOf(token);
  }
  async function ready(rt: Runtime, t: RuntimeTarget) {
    const token = fx.newToken();
    await rt.awaitReady(t, { web: fx.app }, token);
    return fx.outcomeOf(token);
  }

  describe(`${name} honours the Runtime contract`, () => {
    test('build completes its token with {}; deploy then awaitReady completes with a URL per app', async () => {
      const rt = fx.runtime();
      const t = fx.target();
      expect(await build(rt, t)).toEqual({ ok: true, output: expect.any(Object) });
      await rt.deploy(t, launch(), { prune: true });
      const outcome = await ready(rt, t);
      expect(outcome).toEqual({ ok: true, output: { urls: { web: expect.stringMatching(/^https?:\/\//) } } });
    });

    test('a call of an older generation is refused with Superseded', async () => {
      const rt = fx.runtime();
      const t = fx.target(2);
      expect(await build(rt, t)).toEqual({ ok: true, output: expect.any(Object) });
      await expect(rt.deploy(at(t, 1), launch())).rejects.toMatchObject({ name: 'Superseded' });
      await expect(rt.build(at(t, 1), fx.sha(), { web: fx.app }, fx.newToken())).rejects.toMatchObject({
        name: 'Superseded',
      });
    });

    test('teardown is idempotent and fences the generations before it', async () => {
      const rt = fx.runtime();
      const t = fx.target(1);
      expect(await build(rt, t)).toEqual({ ok: true, output: expect.any(Object) });
      await rt.teardown(at(t, 2));
      await rt.teardown(at(t, 2));
      await expect(rt.deploy(t, launch())).rejects.toMatchObject({ name: 'Superseded' });
    });

    test('pruneFences lifts no fence newer than its cutoff: older generations stay refused', async () => {
      const rt = fx.runtime();
      const t = fx.target(1);
      expect(await build(rt, t)).toEqual({ ok: true, output: expect.any(Object) });
      await rt.teardown(at(t, 2));
      const pruned = await rt.pruneFences(new Date(Date.now() - 60_000));
      expect(pruned).toEqual({ removed: expect.any(Number) });
      await expect(rt.deploy(t, launch())).rejects.toMatchObject({ name: 'Superseded' });
      // A newer generation is not held back by whatever pruning left.
      await rt.pruneFences(new Date(Date.now() + 60_000));
      expect(await build(rt, at(t, 3))).toEqual({ ok: true, output: expect.any(Object) });
    });

    test("logs: the build's output and the app's once they exist; nothing for an app never built", async () => {
      const rt = fx.runtime();
      const t = fx.target();
      const query = { tailLines: 100, maxBytes: 1024 * 1024 };
      expect(await rt.logs(t, 'web', { ...query, source: 'app' })).toBeUndefined();
      expect(await build(rt, t)).toEqual({ ok: true, output: expect.any(Object) });
      const built = await rt.logs(t, 'web', { ...query, source: 'build' });
      expect(built).toEqual({ text: expect.any(String), truncated: expect.any(Boolean) });
      await rt.deploy(t, launch(), { prune: true });
      expect(await ready(rt, t)).toMatchObject({ ok: true });
      expect(await rt.logs(t, 'web', { ...query, source: 'app' })).toEqual({
        text: expect.any(String),
        truncated: false,
      });
      expect(await rt.logs(t, 'nope', { ...query, source: 'app' })).toBeUndefined();
      expect(await rt.logs(t, 'nope', { ...query, source: 'build' })).toBeUndefined();
    });

    test('a build of an app whose source is missing fails its token with DeployFailed', async () => {
      const rt = fx.runtime();
      const t = { ...fx.target(), repoFullName: 'acme/does-not-exist' };
      const token = fx.newToken();
      await rt.build(t, fx.sha(), { web: fx.app }, token);
      expect(await fx.outcomeOf(token)).toMatchObject({ ok: false, error: 'DeployFailed' });
    });
  });
}
