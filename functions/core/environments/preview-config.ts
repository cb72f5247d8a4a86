import { CORE_SCHEMA, loadAll as loadYaml } from 'js-yaml';
import * as z from 'zod/mini';
import type { AppSpec, ServiceSpec } from '../../ports/runtime/port.js';
import {
  APP_NAME_RE,
  ENV_VAR_RE,
  issueMessages,
  issuePath,
  listProblems,
  RESERVED_KEY,
  reservedMemberPaths,
} from '../../shared/validation.js';
import { serviceProblems, servicesSchema, withServiceDefaults } from './preview-services.js';

/** `preview.yaml` at the repository root: the apps of a preview environment. */
export const PREVIEW_CONFIG_PATH = 'preview.yaml';

const nonEmpty = z.string().check(z.minLength(1));
const appSchema = z.strictObject({
  port: z.number().check(z.int(), z.gte(1), z.lte(65_535)),
  command: z.optional(nonEmpty),
  build: z.optional(nonEmpty),
  health: z.optional(z.string().check(z.startsWith('/', 'must be a path starting with /'))),
  env: z.optional(
    z.record(
      z.string().check(z.regex(ENV_VAR_RE, 'must be an environment variable name')),
      z.pipe(z.union([z.string(), z.number(), z.boolean()]), z.transform(String)),
    ),
  ),
  dockerfile: z.optional(nonEmpty),
  context: z.optional(nonEmpty),
  buildArgs: z.optional(
    z.record(
      z.string().check(z.regex(ENV_VAR_RE, 'must be a build argument name (letters, digits, _)')),
      z.pipe(z.union([z.string(), z.number(), z.boolean()]), z.transform(String)),
    ),
  ),
  migrate: z.optional(nonEmpty),
});

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** `${apps.<name>.url}` and `${apps.<name>.internalUrl}` in an env value (sibling references). */
const APP_REF_RE = /\$\{apps\.([^}]*)\}/g;
const APP_REF_FIELD_RE = /^([a-z0-9-]+)\.(url|internalUrl)$/;

/**
 * Every sibling reference of every app's env, checked against the apps the file declares (as the runtime
 * would when it starts them), so a reference to an undeclared app is told with the file's other problems
 * rather than at deploy, alone. Reads the values as given (a field beside may have failed).
 */
function checkAppRefs(
  apps: Record<string, unknown>,
  ctx: { addIssue(issue: { code: 'custom'; path: PropertyKey[]; message: string }): void },
): void {
  for (const [app, spec] of Object.entries(apps)) {
    if (!isObject(spec) || !isObject(spec.env)) continue;
    for (const [key, value] of Object.entries(spec.env)) {
      if (typeof value !== 'string') continue;
      for (const m of value.matchAll(APP_REF_RE)) {
        const field = APP_REF_FIELD_RE.exec(m[1]!);
        const path = ['apps', app, 'env', key];
        if (!field)
          ctx.addIssue({
            code: 'custom',
            path,
            message: `${m[0]} is not a reference; use \${apps.<name>.url} or \${apps.<name>.internalUrl}`,
          });
        else if (!Object.hasOwn(apps, field[1]!))
          ctx.addIssue({
            code: 'custom',
            path,
            message: `references app ${field[1]}, which preview.yaml does not declare`,
          });
      }
    }
  }
}

/*
 * The cross-field checks run even when a field inside already failed (`when`), so one answer lists every
 * problem of the file: by default zod skips a refinement once anything below it has an issue. They read
 * the value as given, hence the guards.
 */
const configSchema = z
  .strictObject({
    apps: z.record(z.string(), appSchema).check(
      z.superRefine(
        (apps, ctx) => {
          if (!isObject(apps)) return;
          if (Object.keys(apps).length === 0)
            ctx.addIssue({ code: 'custom', message: 'declare at least one app' });
          for (const name of Object.keys(apps)) {
            if (!APP_NAME_RE.test(name)) {
              ctx.addIssue({
                code: 'custom',
                path: [name],
                message: 'app names must be lower-case DNS labels',
              });
            }
          }
        },
        { when: () => true },
      ),
    ),
    /** The Environment Factory of scenario runs: an app of this file and a path on it. */
    factory: z.optional(
      z.strictObject({
        app: z.string().check(z.regex(APP_NAME_RE, 'must be an app name')),
        path: z._default(z.string().check(z.startsWith('/', 'must be a path starting with /')), '/'),
      }),
    ),
    /** The preview's databases (preview-services.ts). */
    services: servicesSchema,
  })
  .check(
    z.superRefine(
      (config, ctx) => {
        if (isObject(config) && isObject(config.apps)) checkAppRefs(config.apps, ctx);
        const factoryApp: unknown =
          isObject(config) && isObject(config.factory) ? config.factory.app : undefined;
        if (
          typeof factoryApp === 'string' &&
          isObject(config.apps) &&
          !Object.hasOwn(config.apps, factoryApp)
        )
          ctx.addIssue({
            code: 'custom',
            path: ['factory', 'app'],
            message: `no app "${factoryApp}" in apps`,
          });
        for (const { path, message } of serviceProblems(config))
          ctx.addIssue({ code: 'custom', path, message });
      },
      { when: () => true },
    ),
  );

/** The validated file: every app as the Runtime port takes it. */
export type PreviewConfig = Omit<z.infer<typeof configSchema>, 'services'> & {
  apps: Record<string, AppSpec>;
  /** Each service with its `seedApp` resolved (preview-services.ts `withServiceDefaults`). */
  services?: Record<string, ServiceSpec>;
};

/**
 * What is wrong with a `preview.yaml`: every problem found, each `path: message`. The message lists them
 * all; `describe(where)` says which file of which commit (`(in acme/web@4f0c1e2a9b3d)`).
 */
export class PreviewConfigError extends Error {
  override name = 'PreviewConfigError';
  constructor(
    readonly problems: readonly string[],
    /** True when the file is not YAML at all (then there is one problem: the parser's). */
    readonly notYaml = false,
  ) {
    super(PreviewConfigError.text(problems, notYaml));
  }

  /** `preview.yaml: path: message (in repo@sha)`, or with several, `preview.yaml has N problems (in …): …`. */
  describe(where?: string): string {
    return PreviewConfigError.text(this.problems, this.notYaml, where);
  }

  private static text(problems: readonly string[], notYaml: boolean, where?: string): string {
    const at = where ? ` (in ${where})` : '';
    if (notYaml) return `${PREVIEW_CONFIG_PATH} is not valid YAML: ${problems[0]}${at}`;
    if (problems.length === 1) return `${PREVIEW_CONFIG_PATH}: ${problems[0]}${at}`;
    return `${PREVIEW_CONFIG_PATH} has ${problems.length} problems${at}: ${listProblems(problems)}`;
  }
}

/**
 * Parse and validate `preview.yaml`; a PreviewConfigError lists every problem, each with its path
 * (reserved keys, the schema's issues and the cross-field checks, in one answer).
 */
export function parsePreviewConfig(text: string): PreviewConfig {
  let doc: unknown;
  try {
    // YAML 1.2's core schema (no timestamps, merge keys or binary): `2024-01-01` stays a string. An
    // empty file is no document (then refused by the schema, as `null` would be); two are an error.
    const docs = loadYaml(text, { schema: CORE_SCHEMA });
    if (docs.length > 1) throw new Error('expected a single document, but found more');
    doc = docs[0];
  } catch (err) {
    throw new PreviewConfigError([(err as Error).message.split('\n')[0]!], true);
  }
  // A zod record would drop the key silently; refuse it, as every other user-keyed map does.
  const problems = reservedMemberPaths(doc).map(
    (p) => `${issuePath(p) || '(root)'}: must not be ${RESERVED_KEY}`,
  );
  const parsed = configSchema.safeParse(doc);
  if (!parsed.success) problems.push(...issueMessages(parsed.error, Number.POSITIVE_INFINITY));
  if (problems.length > 0 || !parsed.success) throw new PreviewConfigError(problems);
  const { services, ...rest } = parsed.data;
  const resolved = withServiceDefaults(services, rest.apps);
  return resolved ? { ...rest, services: resolved } : rest;
}
