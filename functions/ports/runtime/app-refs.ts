import { DeployFailed } from '../../shared/step-errors.js';
import type { AppLaunch } from './port.js';

/**
 * Sibling references in `preview.yaml` env values: `${apps.<name>.url}` (the app's public URL) and
 * `${apps.<name>.internalUrl}` (its address inside the environment). A runtime knows both, so each
 * runtime resolves them right before it starts an app (`resolveAppRefs`), with the addresses of every app
 * the environment declares. Secret values are never rewritten.
 */
export interface AppAddress {
  url: string;
  internalUrl: string;
}

const REF_RE = /\$\{apps\.([^}]*)\}/g;
const FIELD_RE = /^([a-z0-9-]+)\.(url|internalUrl)$/;

/** The app names the plain (non-secret) env values of `launch` refer to. */
export function referencedApps(launch: Pick<AppLaunch, 'vars' | 'secretKeys'>): string[] {
  const names = new Set<string>();
  for (const [key, value] of Object.entries(launch.vars)) {
    if (launch.secretKeys.includes(key)) continue;
    for (const m of value.matchAll(REF_RE)) {
      const field = FIELD_RE.exec(m[1]!);
      if (field) names.add(field[1]!);
    }
  }
  return [...names];
}

/**
 * `launch` with every `${apps.<name>.url|internalUrl}` in its plain env values replaced. A reference to an
 * app not in `addresses`, or to another field, fails with `DeployFailed` naming the app, the variable and
 * the reference.
 */
export function resolveAppRefs(launch: AppLaunch, addresses: Record<string, AppAddress>): AppLaunch {
  const vars: Record<string, string> = {};
  for (const [key, value] of Object.entries(launch.vars)) {
    if (launch.secretKeys.includes(key)) {
      vars[key] = value;
      continue;
    }
    vars[key] = value.replace(REF_RE, (ref, inner: string) => {
      const field = FIELD_RE.exec(inner);
      if (!field)
        throw new DeployFailed(
          `app ${launch.name}: env ${key}: ${ref} is not a reference; use \${apps.<name>.url} or \${apps.<name>.internalUrl}`,
        );
      const [, name, which] = field as unknown as [string, string, 'url' | 'internalUrl'];
      const address = Object.hasOwn(addresses, name) ? addresses[name] : undefined;
      if (!address)
        throw new DeployFailed(
          `app ${launch.name}: env ${key} references app ${name}, which preview.yaml does not declare`,
        );
      return address[which];
    });
  }
  return { ...launch, vars };
}

const SERVICE_REF_RE = /\$\{services\.([^}]*)\}/g;
const SERVICE_FIELD_RE = /^([a-z0-9-]+)\.url$/;

/**
 * `launch` with every `${services.<name>.url}` in its plain env values replaced by the service's
 * connection URL (`urls`: name → URL, credentials included), and `masked` extended with every service's
 * password, so what quotes the app's output masks them like its secret values. A reference to a service not in `urls`
 * fails with `DeployFailed` naming the app, the variable and the service (never a URL).
 */
export function resolveServiceRefs(
  launch: AppLaunch,
  urls: Record<string, string>,
  passwords: string[],
): AppLaunch {
  const vars: Record<string, string> = {};
  for (const [key, value] of Object.entries(launch.vars)) {
    if (launch.secretKeys.includes(key)) {
      vars[key] = value;
      continue;
    }
    vars[key] = value.replace(SERVICE_REF_RE, (ref, inner: string) => {
      const field = SERVICE_FIELD_RE.exec(inner);
      if (!field)
        throw new DeployFailed(
          `app ${launch.name}: env ${key}: ${ref} is not a reference; use \${services.<name>.url}`,
        );
      const url = Object.hasOwn(urls, field[1]!) ? urls[field[1]!] : undefined;
      if (url === undefined)
        throw new DeployFailed(
          `app ${launch.name}: env ${key} references service ${field[1]}, which preview.yaml does not declare`,
        );
      return url;
    });
  }
  return { ...launch, vars, masked: [...(launch.masked ?? []), ...passwords] };
}
