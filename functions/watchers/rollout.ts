import type { Context } from 'aws-lambda';
import * as z from 'zod/mini';
import { rolloutWatcher } from '../ports/registry/runtime/app-runner.js';
import type { RolloutWatchEvent } from '../ports/runtime/eks/rollout-watch.js';
import { MalformedEvent } from '../shared/errors.js';
import { log } from '../shared/log.js';
import '../shared/zod-locale.js';

const nonEmpty = z.string().check(z.minLength(1));
const count = z.number().check(z.int(), z.gte(0));
const eventSchema = z.object({
  target: z.object({
    orgId: nonEmpty,
    envKey: nonEmpty,
    repoFullName: nonEmpty,
    prNumber: count,
    generation: count,
  }),
  apps: z.array(nonEmpty).check(z.minLength(1)),
  token: nonEmpty,
  deadline: z.number(),
  hop: z._default(count, 0),
  startedAt: z.optional(z.number()),
});

/**
 * The rollout watcher (invoked asynchronously, by the EKS runtime's awaitReady and by itself): watch an
 * environment's rollout for up to one slice of this invocation's time, completing the deploy's task token
 * when it ends, or invoke itself again to go on watching (eks/rollout-watch.ts `EksRolloutWatch.watch`). The event carries no
 * secret values: masking reads them from the cluster.
 */
export async function handler(
  event: unknown,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
): Promise<{ outcome: string; hop: number }> {
  const parsed = eventSchema.safeParse(event);
  if (!parsed.success) {
    log.error('malformed rollout-watch event', { reason: parsed.error.issues[0]?.message });
    throw new MalformedEvent(parsed.error.issues[0]?.message ?? 'unreadable');
  }
  const e = parsed.data;
  const watchEvent: RolloutWatchEvent = { ...e, startedAt: e.startedAt ?? Date.now() };
  return rolloutWatcher().watch(watchEvent, () => context?.getRemainingTimeInMillis() ?? 15 * 60_000);
}
