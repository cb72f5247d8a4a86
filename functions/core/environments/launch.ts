import type { AppLaunch, AppSpec, FrontDoorSettings } from '../../ports/runtime/port.js';
import type { SecretStore } from '../../ports/secret-store/port.js';
import { config } from '../../shared/config.js';
import { effectiveAccess, effectiveSleepMinutes, findApplicationByRepo } from '../applications/index.js';
import { FACTORY_SECRET_VAR, factorySecret } from '../scenarios/index.js';
import type { Environment } from './types.js';

/** What a deploy hands the runtime: how each app starts, and the front door the apps sit behind. */
export interface LaunchPlan {
  launches: AppLaunch[];
  frontDoor: FrontDoorSettings;
}

/**
 * How the apps in scope of a deploy start (the DeployApps step hands the plan to the runtime).
 * Steps: find the application the environment belongs to, unless the head is a fork's (a pull request
 * from another repository runs without the application's secret bundles: the trust boundary); give each
 * app its variables, preview.yaml `env` first, then its secret bundle, which wins on a clash; give the
 * Environment Factory app (preview.yaml `factory`, else the application's) the application's factory
 * signing secret as well; name the image each app runs from (`images`: the one just built, else the one
 * it runs now) when there is one; and set the front door: who may open the apps and when they sleep,
 * from the application's settings (a fork's preview is protected like any other).
 */
export async function planLaunch(
  deps: { secrets: SecretStore },
  env: Pick<Environment, 'orgId' | 'repoFullName' | 'prNumber' | 'inputs' | 'factory'>,
  apps: Record<string, AppSpec>,
  images: Record<string, string>,
): Promise<LaunchPlan> {
  const application = env.inputs?.fork ? undefined : await findApplicationByRepo(env.orgId, env.repoFullName);
  const factoryApp = env.factory?.app ?? application?.factoryApp;
  const secret =
    application && factoryApp && apps[factoryApp]
      ? await factorySecret(deps.secrets, application.applicationId)
      : undefined;
  const factory = secret ? { [FACTORY_SECRET_VAR]: secret } : undefined;
  const launches: AppLaunch[] = await Promise.all(
    Object.entries(apps).map(async ([name, spec]) => {
      const secrets = application
        ? await deps.secrets.read({ applicationId: application.applicationId, app: name })
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
  const owner = application ?? (await findApplicationByRepo(env.orgId, env.repoFullName));
  const frontDoor: FrontDoorSettings = {
    access: effectiveAccess(owner ?? {}, config().mode, config().eks.defaultAccess),
    sleepAfterMs: effectiveSleepMinutes(owner ?? {}, env.prNumber) * 60_000,
    ...(owner ? { applicationId: owner.applicationId } : {}),
  };
  return { launches, frontDoor };
}
