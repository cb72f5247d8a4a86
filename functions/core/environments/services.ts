import { createHash, randomBytes } from 'node:crypto';
import type { ServiceLaunch, ServiceSpec, ServiceState } from '../../ports/runtime/port.js';
import type { BundleRef, SecretStore } from '../../ports/secret-store/port.js';
import type { Environment } from './types.js';

/*
 * The credentials of an environment's services (preview.yaml `services:`): a password per service and
 * environment, generated on the first deploy that declares it and kept in the secret store like secret
 * bundles (encrypted files locally, Secrets Manager in AWS), in a bundle of the environment's own that no
 * API lists: `<orgId>/services.<hash of the environment>` (an app name never holds a dot). Forgotten at
 * teardown, so a preview opened again gets new ones.
 */

/** The role every service's clients connect as. */
export const SERVICE_USER = 'preview';

/** The secret-store bundle holding an environment's service passwords. */
export function serviceCredentialsRef(env: Pick<Environment, 'orgId' | 'envKey'>): BundleRef {
  const hash = createHash('sha256').update(env.envKey).digest('hex').slice(0, 32);
  return { applicationId: env.orgId, app: `services.${hash}` };
}

/**
 * Each declared service with its credentials: the stored password, else a new one (24 random bytes,
 * base64url: safe in a URL as is), stored before it is handed out. Steps: read the bundle; add what is
 * missing; write it back only when something was added.
 */
export async function serviceLaunches(
  deps: { secrets: SecretStore },
  env: Pick<Environment, 'orgId' | 'envKey'>,
  services: Record<string, ServiceSpec> | undefined,
): Promise<ServiceLaunch[]> {
  const entries = Object.entries(services ?? {});
  if (entries.length === 0) return [];
  const ref = serviceCredentialsRef(env);
  const stored = (await deps.secrets.read(ref)) ?? {};
  const next = { ...stored };
  for (const [name] of entries) next[name] ??= randomBytes(24).toString('base64url');
  if (entries.some(([name]) => stored[name] === undefined)) await deps.secrets.write(ref, next);
  return entries.map(([name, spec]) => ({ name, spec, user: SERVICE_USER, password: next[name]! }));
}

/** Forget an environment's service passwords (teardown): the bundle is emptied when it holds any. */
export async function forgetServiceCredentials(
  deps: { secrets: SecretStore },
  env: Pick<Environment, 'orgId' | 'envKey'>,
): Promise<void> {
  const ref = serviceCredentialsRef(env);
  const stored = await deps.secrets.read(ref);
  if (stored && Object.keys(stored).length > 0) await deps.secrets.write(ref, {});
}

/**
 * The services map of the status answer: each service's kind and `status`, or the state the runtime
 * reported for it (`reported`: the deploy's, on EKS `creating` until the watcher has it ready).
 */
export function serviceStates(
  services: Record<string, ServiceSpec> | undefined,
  status: ServiceState['status'],
  reported: Record<string, ServiceState['status']> = {},
): Record<string, ServiceState> {
  return Object.fromEntries(
    Object.entries(services ?? {}).map(([n, s]) => [n, { kind: s.kind, status: reported[n] ?? status }]),
  );
}
