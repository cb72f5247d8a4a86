import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { schedules } from '../../functions/manifest/events.js';
import { lambdaContext } from '../../functions/shared/aws/lambda-context.js';
import { log } from '../../functions/shared/log.js';

/**
 * The expiry sweep, locally: the `expirySweep` schedule's target (the same handler module as in AWS) run
 * by a timer every `everySeconds`, never two at once. A failed sweep is logged; the next one runs anyway.
 */
export interface ExpiryTimer {
  /** Run a sweep now (or join the one running); its result. */
  runNow(): Promise<unknown>;
  stop(): Promise<void>;
}

export function startExpiryTimer(opts: { repoRoot: string; everySeconds: number }): ExpiryTimer {
  const entry = schedules.expirySweep.target.entry;
  const handler = import(pathToFileURL(join(opts.repoRoot, entry)).href).then(
    (m: { handler: (event: unknown, context: unknown) => Promise<unknown> }) => m.handler,
  );
  let running: Promise<unknown> | undefined;
  let stopped = false;
  const runNow = (): Promise<unknown> => {
    if (stopped) return Promise.resolve(undefined);
    running ??= handler
      .then((h) =>
        h(
          {
            source: 'aws.events',
            'detail-type': 'Scheduled Event',
            time: new Date().toISOString(),
            detail: {},
          },
          lambdaContext('expirySweep', `sweep-${Date.now()}`, 300_000),
        ),
      )
      .catch((err: Error) => {
        log.error('expiry sweep failed', { name: err.name, reason: err.message.slice(0, 300) });
        return undefined;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const timer = setInterval(() => void runNow(), opts.everySeconds * 1000);
  timer.unref();
  return {
    runNow,
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
