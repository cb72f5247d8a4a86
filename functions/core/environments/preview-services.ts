import * as z from 'zod/mini';
import type { ServiceSpec } from '../../ports/runtime/port.js';
import { APP_NAME_RE } from '../../shared/validation.js';

/*
 * `services:` of `preview.yaml`: the databases of a preview (Postgres, Redis), beside `apps:`. The field
 * schema is here; the checks across the file (a version the kind has, `from` on a kind that cannot be
 * copied, a `seedApp` or a `${services.<name>.url}` naming nothing declared) are `serviceProblems`, which
 * preview-config.ts runs with its own cross-field checks so one answer lists every problem of the file.
 */

/** The major versions each kind accepts. */
export const SERVICE_VERSIONS: Record<ServiceSpec['kind'], readonly string[]> = {
  postgres: ['14', '15', '16', '17'],
  redis: ['7'],
};

/** `${services.<name>.url}` in an env value. */
export const SERVICE_REF_RE = /\$\{services\.([^}]*)\}/g;
/** The inside of a well-formed reference: a service name and its field. */
export const SERVICE_FIELD_RE = /^([a-z0-9-]+)\.(url)$/;

const nonEmpty = z.string().check(z.minLength(1));

/** One service as written (its `seedApp` defaulted by `withServiceDefaults`). */
export const serviceSchema = z.strictObject({
  kind: z.enum(['postgres', 'redis'], 'must be postgres or redis'),
  version: z.pipe(z.union([z.string(), z.number()]), z.transform(String)),
  from: z.optional(z.literal('main', 'must be main (a copy of the main-branch environment)')),
  seed: z.optional(nonEmpty),
  seedApp: z.optional(z.string().check(z.regex(APP_NAME_RE, 'must be an app name'))),
});

export const servicesSchema = z.optional(z.record(z.string(), serviceSchema));

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What is wrong across `services:` and `apps:` of a file as given (read defensively: fields may be of any
 * type, other checks report those): each a path and a message.
 */
export function serviceProblems(config: unknown): { path: PropertyKey[]; message: string }[] {
  if (!isObject(config)) return [];
  const problems: { path: PropertyKey[]; message: string }[] = [];
  const services = isObject(config.services) ? config.services : {};
  const apps = isObject(config.apps) ? config.apps : {};
  for (const [name, service] of Object.entries(services)) {
    if (!APP_NAME_RE.test(name))
      problems.push({ path: ['services', name], message: 'service names must be lower-case DNS labels' });
    if (Object.hasOwn(apps, name))
      problems.push({ path: ['services', name], message: `an app is named ${name} too` });
    if (!isObject(service)) continue;
    const kind = service.kind;
    if (kind === 'postgres' || kind === 'redis') {
      const version = String(service.version);
      if (service.version !== undefined && !SERVICE_VERSIONS[kind].includes(version))
        problems.push({
          path: ['services', name, 'version'],
          message: `${kind} ${version} is not offered (use one of ${SERVICE_VERSIONS[kind].join(', ')})`,
        });
      if (kind === 'redis' && service.from !== undefined)
        problems.push({ path: ['services', name, 'from'], message: 'only a postgres service can be copied' });
    }
    const seedApp = service.seedApp;
    if (typeof seedApp === 'string' && !Object.hasOwn(apps, seedApp))
      problems.push({ path: ['services', name, 'seedApp'], message: `no app "${seedApp}" in apps` });
  }
  for (const [app, spec] of Object.entries(apps)) {
    const env = isObject(spec) && isObject(spec.env) ? spec.env : {};
    for (const [key, value] of Object.entries(env)) {
      if (typeof value !== 'string') continue;
      for (const m of value.matchAll(SERVICE_REF_RE)) {
        const field = SERVICE_FIELD_RE.exec(m[1]!);
        if (!field)
          problems.push({
            path: ['apps', app, 'env', key],
            message: `${m[0]} is not a reference; use \${services.<name>.url}`,
          });
        else if (!Object.hasOwn(services, field[1]!))
          problems.push({
            path: ['apps', app, 'env', key],
            message: `references service ${field[1]}, which services does not declare`,
          });
      }
    }
  }
  return problems;
}

/** The services of `env` values: the names each app's plain env references, in the order apps are declared. */
export function referencingApps(apps: Record<string, { env?: Record<string, string> }>, service: string) {
  return Object.entries(apps)
    .filter(([, spec]) =>
      Object.values(spec.env ?? {}).some((v) =>
        [...v.matchAll(SERVICE_REF_RE)].some((m) => SERVICE_FIELD_RE.exec(m[1]!)?.[1] === service),
      ),
    )
    .map(([name]) => name);
}

/** Every service with its `seedApp` set: as written, else the first app referencing it, else the first app. */
export function withServiceDefaults(
  services: Record<string, z.infer<typeof serviceSchema>> | undefined,
  apps: Record<string, { env?: Record<string, string> }>,
): Record<string, ServiceSpec> | undefined {
  if (!services) return undefined;
  const out: Record<string, ServiceSpec> = {};
  for (const [name, s] of Object.entries(services)) {
    const seedApp = s.seedApp ?? referencingApps(apps, name)[0] ?? Object.keys(apps)[0]!;
    out[name] = { ...s, seedApp } as ServiceSpec;
  }
  return out;
}
