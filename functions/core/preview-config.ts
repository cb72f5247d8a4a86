import { parse as parseYaml } from 'yaml';
import * as z from 'zod';
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

const appSchema = z
  .object({
    port: z.number().int().min(1).max(65_535),
    command: z.string().min(1).optional(),
    build: z.string().min(1).optional(),
    health: z.string().startsWith('/', 'must be a path starting with /').optional(),
    env: z
      .record(
        z.string().regex(ENV_VAR_RE, 'must be an environment variable name'),
        z.union([z.string(), z.number(), z.boolean()]).transform(String),
      )
      .optional(),
    dockerfile: z.string().min(1).optional(),
    context: z.string().min(1).optional(),
  })
  .strict();

const configSchema = z
  .object({
    apps: z.record(z.string(), appSchema).superRefine((apps, ctx) => {
      if (Object.keys(apps).length === 0)
        ctx.addIssue({ code: 'custom', message: 'declare at least one app' });
      for (const name of Object.keys(apps)) {
        if (!APP_NAME_RE.test(name)) {
          ctx.addIssue({ code: 'custom', path: [name], message: 'app names must be lower-case DNS labels' });
        }
      }
    }),
    /** The Environment Factory of scenario runs (issue 12): an app of this file and a path on it. */
    factory: z
      .object({
        app: z.string().regex(APP_NAME_RE, 'must be an app name'),
        path: z.string().startsWith('/', 'must be a path starting with /').default('/'),
      })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.factory && !Object.hasOwn(config.apps, config.factory.app))
      ctx.addIssue({
        code: 'custom',
        path: ['factory', 'app'],
        message: `no app "${config.factory.app}" in apps`,
      });
  });

/** The validated file: every app as the Runtime port takes it. */
export type PreviewConfig = z.infer<typeof configSchema> & { apps: Record<string, AppSpec> };

/** Parse and validate `preview.yaml`; the error says what is wrong and where. */
export function parsePreviewConfig(text: string): PreviewConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text);
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
