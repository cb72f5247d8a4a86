import type { EventBridgeEvent } from 'aws-lambda';
import * as z from 'zod';
import { imageBuilds } from '../ports/registry/image-builds.js';
import { log } from '../shared/log.js';

const detail = z.object({
  'build-status': z.string().min(1),
  'build-id': z.string().optional(),
  'project-name': z.string().optional(),
  'additional-information': z
    .object({
      environment: z
        .object({
          'environment-variables': z
            .array(z.object({ name: z.string(), value: z.string(), type: z.string().optional() }))
            .optional(),
        })
        .optional(),
      logs: z
        .object({
          'group-name': z.string().optional(),
          'stream-name': z.string().optional(),
          'deep-link': z.string().optional(),
        })
        .optional(),
    })
    .optional(),
});

/** Raised for an event this handler cannot read: it fails the invocation, so the event reaches the DLQ. */
export class MalformedEvent extends Error {
  override name = 'MalformedEvent';
}

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
  const outcome = await imageBuilds().onBuildFinished(parsed.data);
  log.info('image build finished', {
    status: parsed.data['build-status'],
    codebuildId: parsed.data['build-id'],
    outcome,
  });
  return { outcome };
}
