import type { EventBridgeEvent } from 'aws-lambda';
import * as z from 'zod/mini';
import { buildSecretValues, isCurrent } from '../core/environments/index.js';
import { imageBuilds } from '../ports/registry/runtime/image-builder.js';
import { secretStore } from '../ports/registry/secret-store.js';
import { MalformedEvent } from '../shared/errors.js';
import { log } from '../shared/log.js';
import '../shared/zod-locale.js';

const detail = z.object({
  'build-status': z.string().check(z.minLength(1)),
  'build-id': z.optional(z.string()),
  'project-name': z.optional(z.string()),
  'additional-information': z.optional(
    z.object({
      environment: z.optional(
        z.object({
          'environment-variables': z.optional(
            z.array(z.object({ name: z.string(), value: z.string(), type: z.optional(z.string()) })),
          ),
        }),
      ),
      logs: z.optional(
        z.object({
          'group-name': z.optional(z.string()),
          'stream-name': z.optional(z.string()),
          'deep-link': z.optional(z.string()),
        }),
      ),
    }),
  ),
});

/**
 * Target of the `imageBuildFinished` rule (functions/manifest/events.ts): a CodeBuild image build reached
 * a terminal state, so the BuildImages task waiting on it ends (EventBridge invokes this asynchronously;
 * a failure is retried twice by Lambda, then goes to the function's on-failure destination).
 */
export async function handler(event: EventBridgeEvent<string, unknown>): Promise<{ outcome: string }> {
  const parsed = detail.safeParse(event?.detail);
  if (!parsed.success) {
    log.error('malformed image-build event', { id: event?.id, reason: parsed.error.issues[0]?.message });
    throw new MalformedEvent(`event ${event?.id ?? '?'}: ${parsed.error.issues[0]?.message ?? 'unreadable'}`);
  }
  // A build of a superseded generation ends its task with Superseded (the execution ends quietly); a
  // failed build's output, quoted in the environment's error, is masked with its apps' secret values.
  const outcome = await imageBuilds().onBuildFinished(parsed.data, {
    current: isCurrent,
    secretValues: (scope, apps) => buildSecretValues(secretStore(), scope, apps),
  });
  log.info('image build finished', {
    status: parsed.data['build-status'],
    codebuildId: parsed.data['build-id'],
    outcome,
  });
  return { outcome };
}
