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
import type { AppSpec, RuntimeTarget, ServiceState } from '../ports/runtime/port.js';
import { log } from '../shared/log.js';

/**
 * Deploy step (deploying / applying → waiting-ready), a callback task: start every app in scope as the
 * environment's launch plan says (`planLaunch`: each app's variables, its secret bundle and the factory
 * secret, its image, the front door) with the environment's services and their credentials (created on
 * first use, seeded once; each app's `migrate` before its new commit starts), then hand the runtime the token to end once every app of the
 * environment answers its readiness check, with their URLs. A whole deploy also removes apps the preview
 * config no longer declares. Runtimes that run images get each app's image: the one BuildImages just
 * reported, else the one it runs now (a restart builds nothing); the environment remembers them. The
 * services' states are the runtime's (`serviceStates`: on EKS `creating` until the watcher has them
 * ready; MarkReady says `ready`), else `ready`: a runtime without it waits for them in its deploy.
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
    // Its services as the runtime has them now: ready once applied locally (the deploy waits for them);
    // on EKS `creating` until the rollout watcher has them ready (MarkReady then says `ready`).
    ...(env.serviceSpecs
      ? {
          services: serviceStates(
            env.serviceSpecs,
            'ready',
            await reportedServices(target, Object.keys(env.serviceSpecs)),
          ),
        }
      : {}),
    ...(Object.keys(images).length ? { images: { ...env.images, ...images } } : {}),
    // How each app got what it now runs (a restart builds nothing: it keeps what it had; a whole deploy
    // names every app it runs).
    ...(input.built?.builds
      ? { builds: input.mode === undefined ? input.built.builds : { ...env.builds, ...input.built.builds } }
      : {}),
  });
  await appRunner().awaitReady(target, env.appSpecs as Record<string, AppSpec>, taskToken);
}

/**
 * The services' states the runtime reports after a deploy (none: ready). A look that fails says `creating`
 * (MarkReady says `ready` once the deploy is), rather than failing a deploy that was applied.
 */
async function reportedServices(
  target: RuntimeTarget,
  names: string[],
): Promise<Record<string, ServiceState['status']>> {
  const runner = appRunner();
  if (!runner.serviceStates) return {};
  try {
    return await runner.serviceStates(target);
  } catch (err) {
    log.warn('could not read the services after the deploy', { error: (err as Error).name });
    return Object.fromEntries(names.map((n) => [n, 'creating' as const]));
  }
}
