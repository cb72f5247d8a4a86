import { effectiveAccess, effectiveSleepMinutes } from '../core/applications/access.js';
import { findApplicationByRepo } from '../core/applications/applications.js';
import { beginAppStep, type CallbackEvent, transition } from '../core/environments/pipeline.js';
import { FACTORY_SECRET_VAR, factorySecret } from '../core/scenarios/factory.js';
import { clusterRuntime } from '../ports/registry/runtime.js';
import { secretStore } from '../ports/registry/secret-store.js';
import type { AppLaunch, AppSpec, FrontDoorSettings } from '../ports/runtime/port.js';
import { config } from '../shared/config.js';

/**
 * Deploy step (deploying / applying → waiting-ready), a callback task: start every app in scope from its
 * latest build with its environment (preview.yaml `env`, then its secret bundle, which wins on a clash),
 * then hand the runtime the token to end once every app of the environment answers its readiness check,
 * with their URLs. A whole deploy also removes apps the preview config no longer declares. Runtimes
 * that run images get each app's image: the one BuildImages just reported, else the one it runs now
 * (a restart builds nothing); the environment remembers them.
 */
export async function handler(event: CallbackEvent): Promise<void> {
  const { input, taskToken } = event;
  // An app redeploy of an environment whose failure stopped its apps (`stoppedApps`) starts those again
  // too: the environment is ready only once every app answers.
  const { env, apps, target } = await beginAppStep(
    input,
    { status: 'deploying', phase: 'applying' },
    { withStopped: true },
  );
  // A pull request from a fork runs without the application's secret bundles (the trust boundary).
  const application = env.inputs?.fork ? undefined : await findApplicationByRepo(env.orgId, env.repoFullName);
  const images: Record<string, string> = { ...env.images, ...input.built?.images };
  // The Environment Factory app gets the application's factory signing secret (issue 12).
  const factoryApp = env.factory?.app ?? application?.factoryApp;
  const secret =
    application && factoryApp && apps[factoryApp]
      ? await factorySecret(secretStore(), application.applicationId)
      : undefined;
  const factory = secret ? { [FACTORY_SECRET_VAR]: secret } : undefined;
  const launches: AppLaunch[] = await Promise.all(
    Object.entries(apps).map(async ([name, spec]) => {
      const secrets = application
        ? await secretStore().read({ applicationId: application.applicationId, app: name })
        : undefined;
      const mounted = name === factoryApp ? { ...secrets, ...factory } : secrets;
      return {
        name,
        spec,
        vars: { ...spec.env, ...mounted },
        secretKeys: Object.keys(mounted ?? {}),
        ...(images[name] ? { image: images[name] } : {}),
      };
    }),
  );
  // Who may open the apps and when they sleep (issue 29): a fork's preview is protected like any other.
  const owner = application ?? (await findApplicationByRepo(env.orgId, env.repoFullName));
  const frontDoor: FrontDoorSettings = {
    access: effectiveAccess(owner ?? {}, config().mode),
    sleepAfterMs: effectiveSleepMinutes(owner ?? {}, env.prNumber) * 60_000,
    ...(owner ? { applicationId: owner.applicationId } : {}),
  };
  await clusterRuntime().deploy(target, launches, {
    prune: input.mode === undefined,
    restart: input.mode === 'restart',
    apps: Object.keys(env.appSpecs ?? apps),
    frontDoor,
  });
  await transition(input, {
    phase: 'waiting-ready',
    // The access the apps now run with: the environment's links follow it (core/environments.ts).
    access: frontDoor.access,
    ...(Object.keys(images).length ? { images: { ...env.images, ...images } } : {}),
    // How each app got what it now runs (a restart builds nothing: it keeps what it had; a whole deploy
    // names every app it runs).
    ...(input.built?.builds
      ? { builds: input.mode === undefined ? input.built.builds : { ...env.builds, ...input.built.builds } }
      : {}),
  });
  await clusterRuntime().awaitReady(target, env.appSpecs as Record<string, AppSpec>, taskToken);
}
