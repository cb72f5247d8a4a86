import {
  beginAppStep,
  type CallbackEvent,
  planLaunch,
  serviceLaunches,
  serviceStates,
  transition,
} from '../core/environments/index.js';
import { appRunner } from '../ports/registry/runtime/app-runner.js';
import { secretStore } from '../ports/registry/secret-store.js';
import type { AppSpec } from '../ports/runtime/port.js';

/**
 * Deploy step (deploying / applying → waiting-ready), a callback task: start every app in scope as the
 * environment's launch plan says (`planLaunch`: each app's variables, its secret bundle and the factory
 * secret, its image, the front door) with the environment's services and their credentials (created on
 * first use, seeded once; each app's `migrate` before its new commit starts), then hand the runtime the token to end once every app of the
 * environment answers its readiness check, with their URLs. A whole deploy also removes apps the preview
 * config no longer declares. Runtimes that run images get each app's image: the one BuildImages just
 * reported, else the one it runs now (a restart builds nothing); the environment remembers them.
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
  const images: Record<string, string> = { ...env.images, ...input.built?.images };
  const { launches, frontDoor } = await planLaunch({ secrets: secretStore() }, env, apps, images);
  const services = await serviceLaunches({ secrets: secretStore() }, env, env.serviceSpecs);
  await appRunner().deploy(target, launches, {
    prune: input.mode === undefined,
    restart: input.mode === 'restart',
    apps: Object.keys(env.appSpecs ?? apps),
    frontDoor,
    ...(services.length ? { services } : {}),
  });
  await transition(input, {
    phase: 'waiting-ready',
    // The access the apps now run with: the environment's links follow it (core/environments/).
    access: frontDoor.access,
    // Its services are up once the runtime has applied the deploy (it waits for them before any app).
    ...(env.serviceSpecs ? { services: serviceStates(env.serviceSpecs, 'ready') } : {}),
    ...(Object.keys(images).length ? { images: { ...env.images, ...images } } : {}),
    // How each app got what it now runs (a restart builds nothing: it keeps what it had; a whole deploy
    // names every app it runs).
    ...(input.built?.builds
      ? { builds: input.mode === undefined ? input.built.builds : { ...env.builds, ...input.built.builds } }
      : {}),
  });
  await appRunner().awaitReady(target, env.appSpecs as Record<string, AppSpec>, taskToken);
}
