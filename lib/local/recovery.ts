import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { ProcessRuntime } from '../../functions/adapters/local/process-runtime.js';
import {
  type Environment,
  type EnvironmentStatus,
  type Resumption,
  resumeEnvironment,
} from '../../functions/core/environments.js';
import { ddb, table } from '../../functions/shared/dynamo.js';
import { log } from '../../functions/shared/log.js';
import type { Workflows } from '../../functions/shared/ports.js';

/** Every status but torn_down: in-flight work, ready environments, and failed ones a teardown may wait on. */
const LIVE: EnvironmentStatus[] = ['pending', 'building', 'deploying', 'ready', 'failed'];

async function* environmentsWithStatus(status: EnvironmentStatus): AsyncGenerator<Environment> {
  let ExclusiveStartKey: Record<string, unknown> | undefined;
  do {
    const page = await ddb().send(
      new QueryCommand({
        TableName: table('environments'),
        IndexName: 'byStatus',
        KeyConditionExpression: '#status = :s',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':s': status },
        ExclusiveStartKey,
      }),
    );
    for (const item of page.Items ?? []) yield item as Environment;
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey);
}

/**
 * On local server start: whatever the last run left is brought back to a true state. The runtime first
 * kills processes a crash orphaned (and forgets what ran); then every environment not torn down is
 * resumed (`resumeEnvironment`): in-flight deploys and teardowns start again at their generation, ready
 * environments restart their apps from their builds. Runs in the background; returns the tally.
 */
export async function recoverEnvironments(
  workflows: Workflows,
  runtime: ProcessRuntime,
): Promise<Record<Resumption, number> & { orphansKilled: number }> {
  const tally = { 'resumed-deploy': 0, 'resumed-teardown': 0, restarted: 0, unchanged: 0, orphansKilled: 0 };
  tally.orphansKilled = runtime.recover();
  for (const status of LIVE) {
    for await (const env of environmentsWithStatus(status)) {
      try {
        tally[await resumeEnvironment(workflows, env)]++;
      } catch (err) {
        log.error('could not resume environment', { envKey: env.envKey, error: (err as Error).message });
      }
    }
  }
  if (Object.values(tally).some((n, i) => i !== 3 && n > 0)) log.info('local recovery', tally);
  return tally;
}
