import type { EventBridgeEvent } from 'aws-lambda';
import * as z from 'zod/mini';
import { MalformedEvent, publicMessage } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { describeIssues } from '../shared/validation.js';

type Event = EventBridgeEvent<string, unknown>;

/**
 * A service-bus rule's target: the detail is validated (a malformed one is logged with its reason and
 * fails the invocation with MalformedEvent, so EventBridge's retries and the function's on-failure
 * destination (locally: the dead-letter file) get it; nothing else happens), then `run` acts on it. A
 * failure of `run` (a 404 or 409 of the use case, a store that is down) is logged and fails the
 * invocation too: Lambda retries it twice, then it reaches the on-failure destination.
 */
export function consumer<S extends z.core.$ZodType>(
  rule: string,
  schema: S,
  run: (detail: z.infer<S>, event: Event) => Promise<string>,
): (event: Event) => Promise<{ outcome: string }> {
  return async (event) => {
    const fields = { rule, eventId: event?.id, detailType: event?.['detail-type'] };
    const parsed = z.safeParse(schema, event?.detail);
    if (!parsed.success) {
      const reason = describeIssues('detail', parsed.error);
      log.error('malformed event', { ...fields, reason });
      throw new MalformedEvent(`event ${event?.id ?? '?'} (${event?.['detail-type'] ?? '?'}): ${reason}`);
    }
    try {
      const outcome = await run(parsed.data, event);
      log.info('event handled', { ...fields, outcome });
      return { outcome };
    } catch (err) {
      log.error('event failed', { ...fields, error: (err as Error).name, reason: publicMessage(err) });
      throw err;
    }
  };
}
