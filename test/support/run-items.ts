import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import type { RunItem, RunStatus } from '../../functions/core/runs/store.js';
import { keys } from '../../functions/manifest/tables.js';
import { ddb, table } from '../../functions/shared/aws/dynamo.js';

/**
 * A run item as `startRun` stores it (every index key from `keys.runs.indexKeys`), without steps or
 * variables, named `test <testId>` in folder `folder <folderId>`: what the listing tests seed.
 */
export function storedRun(r: {
  orgId: string;
  runId: string;
  testId: string;
  folderId: string;
  status: RunStatus;
  createdAt: string;
}): RunItem {
  const { orgId, runId, testId, folderId, status, createdAt } = r;
  return {
    runId,
    orgId,
    testId,
    name: `test ${testId}`,
    status,
    createdAt,
    folder: { id: folderId, name: `folder ${folderId}` },
    source: 'api',
    variables: {},
    steps: [],
    ...keys.runs.indexKeys({ orgId, runId, testId, folderId, status, createdAt }),
  };
}

/** Put run items straight into the runs table, 25 per BatchWriteItem. */
export async function seedRuns(items: RunItem[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25)
    await ddb().send(
      new BatchWriteCommand({
        RequestItems: { [table('runs')]: items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) },
      }),
    );
}
