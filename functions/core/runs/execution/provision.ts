import type { RunAccessCookie } from '../../applications/index.js';
import { testRunShortId } from '../../recipes/index.js';
import {
  callFactory,
  factorySecret,
  factoryUrl,
  loadScenarioRecipe,
  noFactorySecret,
  parseUpAnswer,
  type ScenarioState,
  saveScenarioState,
  substituteTokens,
  type UpAnswer,
  upPayload,
} from '../../scenarios/index.js';
import type { RunItem, RunTarget } from '../store.js';
import type { ExecuteDeps } from './types.js';

/**
 * The cookies of a scenario's `up` answer, each for a host of the run's preview: one without a domain is
 * the app's; one whose domain (a leading dot ignored) is not exactly a host of one of the environment's
 * app URLs would reach something else (a parent domain holds other previews), so the auth is refused.
 */
export function previewCookies<C extends { name: string; domain?: string }>(
  cookies: C[],
  target: Pick<RunTarget, 'appUrl' | 'urls'>,
): C[] {
  const hosts = new Set(
    [target.appUrl, ...Object.values(target.urls ?? {})].map((u) => new URL(u).hostname.toLowerCase()),
  );
  for (const c of cookies) {
    if (c.domain === undefined) continue;
    const domain = c.domain.replace(/^\./, '').toLowerCase();
    if (!hosts.has(domain))
      throw new Error(
        `the factory's cookie "${c.name}" is for ${domain}, not a host of this run's preview ` +
          `(${[...hosts].sort().join(', ')})`,
      );
  }
  return cookies;
}

/**
 * Where the run's factory calls go, and the headers they carry: the factory app's address for
 * the service's own calls (`serviceUrls`: locally its own port, behind no front door), else its public
 * URL, with the access cookie of a protected preview when one is for that URL's origin (only there).
 */
export function factoryRoute(
  target: Pick<RunTarget, 'urls' | 'serviceUrls' | 'factory'>,
  access: RunAccessCookie[] = [],
): { url: string; headers: Record<string, string> } | { error: string } {
  const factory = target.factory!;
  const service = target.serviceUrls?.[factory.app];
  const url = factoryUrl(service ? { [factory.app]: service } : (target.urls ?? {}), factory);
  if (typeof url !== 'string') return url;
  if (service) return { url, headers: {} };
  const origin = new URL(url).origin;
  const mine = access.filter((a) => new URL(a.url).origin === origin);
  return {
    url,
    headers: mine.length ? { cookie: mine.map((a) => `${a.cookie.name}=${a.cookie.value}`).join('; ') } : {},
  };
}

/**
 * Provision a run's scenario (scenario data): the factory (preview.yaml `factory`, else the application's
 * setting) must be configured and an app of the environment; load the recipe; send the signed `up` with
 * the recipe's graph, tokens substituted (a retry's `testRunId` is `<run id>-<attempt>`), to the factory
 * app's service address, or to its public URL with the preview's access cookie (factoryRoute); record it
 * on the run. An error names what failed (masked).
 */
export async function provision(
  deps: ExecuteDeps,
  run: RunItem,
  target: RunTarget,
  masked: string[],
  mask: (text: string) => string,
  attempt = 1,
  access: RunAccessCookie[] = [],
): Promise<
  | { state: ScenarioState; url: string; secret: string; up: UpAnswer; headers: Record<string, string> }
  | { error: string }
> {
  const ref = run.scenario!;
  const label = `scenario "${ref.recipe}" (setup ${ref.setupId})`;
  // Each attempt its own tokens (retries), so a retry never meets the data of the attempt before.
  const testRunId = attempt > 1 ? `${run.runId}-${attempt}` : run.runId;
  const state: ScenarioState = {
    setupId: ref.setupId,
    name: ref.recipe,
    ...(ref.version !== undefined ? { version: ref.version } : {}),
    testRunId,
    testRunShortId: testRunShortId(testRunId),
    status: 'provisioning',
  };
  const fail = async (message: string) => {
    state.status = 'up_failed';
    state.error = mask(message).slice(0, 2000);
    await saveScenarioState(run.runId, state);
    return { error: mask(`${label} could not be provisioned: ${message}`) };
  };
  if (!target.factory)
    return fail(
      `no Environment Factory is configured for application ${target.applicationId}: set ` +
        '`factory: {app, path}` in preview.yaml, or `previewctl apps update --factory-app APP --factory-path PATH`',
    );
  const route = factoryRoute(target, access);
  if ('error' in route) return fail(route.error);
  const { url, headers } = route;
  state.factoryUrl = url;
  if (headers.cookie && target.envKey) state.factoryAccess = { orgId: run.orgId, envKey: target.envKey };
  const loaded = await loadScenarioRecipe(run.orgId, ref);
  if ('error' in loaded) return fail(loaded.error);
  state.version = loaded.recipe.version;
  const secret = await factorySecret(deps.secrets, target.applicationId);
  if (!secret) return fail(noFactorySecret(target.applicationId));
  masked.push(secret);
  await saveScenarioState(run.runId, state);
  const started = Date.now();
  try {
    const create = substituteTokens(loaded.recipe.create, {
      testRunId,
      testRunShortId: state.testRunShortId,
    });
    const answer = parseUpAnswer(
      await callFactory(url, secret, upPayload(state, create), mask, { ...deps.factory, headers }),
    );
    state.upMs = Date.now() - started;
    state.status = 'up';
    if (answer.refs !== undefined) state.refs = answer.refs;
    await saveScenarioState(run.runId, state);
    return { state, url, secret, up: answer, headers };
  } catch (err) {
    state.upMs = Date.now() - started;
    return fail((err as Error).message);
  }
}
