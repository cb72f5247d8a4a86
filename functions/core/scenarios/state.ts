import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { AccessScope } from '../../shared/access-token.js';
import { ddb, table, updateIf } from '../../shared/aws/dynamo.js';

/*
 * What a run records of its scenario (attributes `scenarioState` and `downClaim` of the run item): its
 * shape, its writes as provisioning goes, the one right to send `down`, how it reads back, and what a
 * TestRun's `metadata` shows of it.
 */

/** What a run records of its scenario (attribute `scenarioState` of the run item). */
export interface ScenarioState {
  setupId: string;
  name: string;
  version?: number;
  testRunId: string;
  testRunShortId: string;
  factoryUrl?: string;
  /**
   * The protected environment whose access cookie the factory calls carry (behind the front door: its
   * public URL, in AWS): an owed `down` sent later signs a fresh one. Never the token itself.
   */
  factoryAccess?: AccessScope;
  /** `up` answered: `down` is owed. */
  status: 'provisioning' | 'up' | 'up_failed' | 'down' | 'down_failed';
  upMs?: number;
  downMs?: number;
  error?: string;
  downError?: string;
  refs?: unknown;
}

/** Write the run's scenario record (any status of the run: it is metadata, not the outcome). */
export async function saveScenarioState(runId: string, state: ScenarioState): Promise<void> {
  const stored = Object.fromEntries(
    Object.entries({
      ...state,
      refs: state.refs === undefined ? undefined : JSON.stringify(state.refs),
    }).filter(([, v]) => v !== undefined),
  );
  await ddb().send(
    new UpdateCommand({
      TableName: table('runs'),
      Key: { runId },
      UpdateExpression: 'SET scenarioState = :s',
      ConditionExpression: 'attribute_exists(runId)',
      // refs may be anything JSON; store it as text so any shape survives DynamoDB.
      ExpressionAttributeValues: { ':s': stored },
    }),
  );
}

/** The stored record, refs parsed back. */
export function readScenarioState(raw: unknown): ScenarioState | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const s = { ...(raw as ScenarioState) };
  if (typeof s.refs === 'string') {
    try {
      s.refs = JSON.parse(s.refs);
    } catch {
      // left as text
    }
  }
  return s;
}

/** The run's `metadata` fields of its scenario. */
export function scenarioMetadata(state: ScenarioState | undefined): Record<string, unknown> {
  if (!state) return {};
  return {
    scenario: {
      setup_id: state.setupId,
      recipe: state.name,
      version: state.version ?? null,
      status: state.status,
    },
    test_run_id: state.testRunId,
    test_run_short_id: state.testRunShortId,
    ...(state.upMs !== undefined ? { scenario_up_ms: state.upMs } : {}),
    ...(state.downMs !== undefined ? { scenario_down_ms: state.downMs } : {}),
    ...(state.error ? { scenario_error: state.error } : {}),
    ...(state.downError ? { scenario_down_error: state.downError } : {}),
  };
}

/**
 * Take the right to send a run's `down` (one `down` whoever races): a conditional write of `downClaim` while its
 * scenario is `up` and nobody claimed it. The executor, MarkFailed, the local recovery after a restart
 * and the AWS sweep each claim before sending, so the factory gets one `down` whoever races; a sender
 * that dies after claiming leaves the record `up` with the claim (at most once, never twice).
 * @returns whether this caller claimed it
 */
export async function claimDown(runId: string, by: string): Promise<boolean> {
  return updateIf({
    TableName: table('runs'),
    Key: { runId },
    UpdateExpression: 'SET downClaim = :by',
    ConditionExpression: 'attribute_not_exists(downClaim) AND scenarioState.#status = :up',
    ExpressionAttributeNames: { '#status': 'status' },
    ExpressionAttributeValues: { ':by': `${by}@${new Date().toISOString()}`, ':up': 'up' },
  });
}

/**
 * Give back the `down` claim of a run whose attempt sent its `down` (a retried attempt): its retry provisions a
 * fresh scenario whose `down` is claimed anew. Only while the run is still `running` under `attempt`.
 */
export async function releaseDownClaim(runId: string, attempt: string): Promise<boolean> {
  return updateIf({
    TableName: table('runs'),
    Key: { runId },
    UpdateExpression: 'REMOVE downClaim',
    ConditionExpression: '#status = :running AND attempt = :attempt',
    ExpressionAttributeNames: { '#status': 'status' },
    ExpressionAttributeValues: { ':running': 'running', ':attempt': attempt },
  });
}
