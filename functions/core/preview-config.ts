import { CORE_SCHEMA, loadAll as loadYaml } from 'js-yaml';
import * as z from 'zod/mini';
import type { AppSpec } from '../ports/runtime/port.js';
import {
  APP_NAME_RE,
  ENV_VAR_RE,
  issueMessages,
  issuePath,
  RESERVED_KEY,
  reservedMemberPath,
} from '../shared/validation.js';

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
});

const configSchema = z
  .strictObject({
    apps: z.record(z.string(), appSchema).check(
      z.superRefine((apps, ctx) => {
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
      }),
    ),
    /** The Environment Factory of scenario runs (issue 12): an app of this file and a path on it. */
    factory: z.optional(
      z.strictObject({
        app: z.string().check(z.regex(APP_NAME_RE, 'must be an app name')),
        path: z._default(z.string().check(z.startsWith('/', 'must be a path starting with /')), '/'),
      }),
    ),
  })
  .check(
    z.superRefine((config, ctx) => {
      if (config.factory && !Object.hasOwn(config.apps, config.factory.app))
        ctx.addIssue({
          code: 'custom',
          path: ['factory', 'app'],
          message: `no app "${config.factory.app}" in apps`,
        });
    }),
  );

/** The validated file: every app as the Runtime port takes it. */
export type PreviewConfig = z.infer<typeof configSchema> & { apps: Record<string, AppSpec> };

/** Parse and validate `preview.yaml`; the error says what is wrong and where. */
export function parsePreviewConfig(text: string): PreviewConfig {
  let doc: unknown;
  try {
    // YAML 1.2's core schema (no timestamps, merge keys or binary): `2024-01-01` stays a string. An
    // empty file is no document (then refused by the schema, as `null` would be); two are an error.
    const docs = loadYaml(text, { schema: CORE_SCHEMA });
    if (docs.length > 1) throw new Error('expected a single document, but found more');
    doc = docs[0];
  } catch (err) {
    throw new Error(`${PREVIEW_CONFIG_PATH} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  // A zod record would drop the key silently; refuse it, as every other user-keyed map does.
  const reserved = reservedMemberPath(doc);
  if (reserved)
    throw new Error(
      `${PREVIEW_CONFIG_PATH}: ${issuePath(reserved) || '(root)'}: must not be ${RESERVED_KEY}`,
    );
  const parsed = configSchema.safeParse(doc);
  if (!parsed.success) {
    throw new Error(`${PREVIEW_CONFIG_PATH}: ${issueMessages(parsed.error, 1)[0]}`);
  }
  return parsed.data;
}
