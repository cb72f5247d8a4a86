import { GetCommand, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import { keys } from '../../manifest/tables.js';
import { ddb, table, updateIf } from '../../shared/aws/dynamo.js';
import type { AccessMode } from '../applications/index.js';
import type { FactoryLocation, ScenarioRef } from '../scenarios/index.js';
import type { ApplicationVersion, Folder, StepElement } from '../test-definitions/index.js';
import type { RunEnvironment } from './environment.js';

/*
 * A run as stored (table `runs`): its statuses, its shape, its key and status keys, where its media go,
 * and the read every other run module starts from. What writes it: lifecycle.ts; what callers see of
 * it: views.ts; how GET /run pages through it: listing.ts; where it goes: target.ts.
 */

export const RUN_STATUSES = ['pending', 'running', 'passed', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
/** A step's status: `skipped` for every step after the first failure (or all, when the run never ran). */
export type StepStatus = 'pending' | 'passed' | 'failed' | 'skipped';

/** A step of a run as stored: a copy of the test's step (same id) plus its outcome. */
export interface RunStepItem {
  id: string;
  instruction: string;
  interaction: string;
  /** The recorded URL until the step runs; then the page's URL after the step. */
  url: string;
  element: StepElement;
  output: string;
  status: StepStatus;
  /** Storage key of the step's screenshot (media store), once taken. */
  imageKey?: string;
  /**
   * What the page reported during the step (core/run-media.ts): console errors and warnings and
   * page errors, failed or 4xx/5xx requests, masked, at most MAX_STEP_EVENTS; `eventsDropped` past that.
   */
  console?: ConsoleEvent[];
  network?: NetworkEvent[];
  eventsDropped?: number;
  /** The step's recorded selector matched nothing and it acted on this element instead (heal.ts). */
  healed?: HealedStep;
}

/** A healed step: the recorded selector, the one it acted on, the heal's score (0..1, two decimals). */
export interface HealedStep {
  from: string;
  to: string;
  score: number;
  /** The element's outer HTML when it was healed (masked), for `previewctl tests heal`. */
  html?: string;
}

/** A console message or page error a step saw (masked). */
export type ConsoleEvent = { level: string; text: string };
/** A failed or 4xx/5xx request a step saw (masked). */
export type NetworkEvent = { status: string; text: string };

/**
 * A run as stored (table `runs`, key `runId`). `variables` are the test's saved variables with this run's
 * overrides applied: internal, never in a response. The `*Key` attributes feed the listing GSIs
 * (`keys.runs.indexKeys`); every write of `status` writes its three status keys too.
 */
export interface RunItem {
  runId: string;
  orgId: string;
  testId: string;
  /** The test's name when the run started. */
  name: string;
  status: RunStatus;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  /** Why the run failed (a target that could not be resolved, a step, a timeout, a crash). */
  error?: string;
  folder: Folder;
  source: string;
  applicationVersionId?: string;
  /** The merge gate's record (core/gate/) a preview run belongs to. */
  gateKey?: string;
  /**
   * Why the run failed, classified: `environment` when the preview never answered (its error names the
   * environment); absent for a failing test. The merge gate's title tells them apart.
   */
  errorKind?: 'environment';
  /** How long the run waited for its preview to wake before its first step (execution/wake.ts). */
  wake?: RunWake;
  /** Copied from the test when the run started: what the run targets, and its timeouts. */
  applicationId?: string;
  applicationVersion?: ApplicationVersion;
  stepTimeoutSeconds?: number;
  runTimeoutSeconds?: number;
  /** Copied from the test: how many times a failed attempt is run again (absent: none). */
  retries?: number;
  /** Copied from the test: `false` when its steps are never healed. */
  heal?: false;
  /** How many steps of the run's last attempt were healed (absent: none). */
  healedSteps?: number;
  /**
   * The origins the browser refused to the pages of the run's last attempt without failing a step (an
   * analytics host, a font CDN: the page's own requests, frames and popups), masked, sorted, at most 20.
   */
  refusedOrigins?: string[];
  /** Every attempt once the run ended: the last one's steps and media are the run's. */
  attempts?: RunAttemptItem[];
  /** A later attempt passed after an earlier one failed (the run is `passed`). */
  flaky?: boolean;
  /** The first page the run opened (resolved by Prepare). */
  targetUrl?: string;
  /** Set when the run starts executing: every later write of that execution is conditioned on it. */
  attempt?: string;
  /**
   * The Step Functions execution whose Prepare set `attempt`, and the target it resolved: a retry of that
   * Prepare whose first write landed hands Execute the same attempt (idempotent under retries).
   */
  preparedBy?: string;
  target?: RunTarget;
  variables: Record<string, string>;
  /** Copied from the test: variables marked secret in the tests file, masked whatever their names. */
  secretVariables?: string[];
  steps: RunStepItem[];
  /** Storage key of the run's video (media store), once stored. */
  videoKey?: string;
  /** Storage key of the run's Playwright trace (a zip the trace viewer opens), once stored. */
  traceKey?: string;
  /** The test's scenario when the run started (scenario data), and what its provisioning did. */
  scenario?: ScenarioRef;
  scenarioState?: unknown;
  /** `<createdAt>#<runId>`: the sort key of every index (newest first when read backwards). */
  createdKey: string;
  testKey: string;
  folderKey: string;
  statusKey: string;
  /** Absent on runs older than the per-filter listing indexes until backfilled at the local server's start. */
  testStatusKey?: string;
  folderStatusKey?: string;
  /** `keys.runs.flaky(orgId)` on a run that ended flaky, and only there (the sparse `listFlaky` index). */
  flakyKey?: string;
  /** `keys.runs.healed(orgId)` on a run that ended with a healed step, and only there (`listHealed`). */
  healedKey?: string;
}

/** One attempt of a run (a retried test has several), kept in its record once the run ended. */
/** A run's wait for its preview: in all, and when each app answered (ms from the wait's start). */
export interface RunWake {
  waitedMs: number;
  apps: Record<string, number>;
}

export interface RunAttemptItem {
  number: number;
  status: 'passed' | 'failed';
  error?: string;
  /** Its steps' statuses in order (`passed`, `failed`, `skipped`…). */
  steps: string[];
  videoKey?: string;
  traceKey?: string;
  startedAt: string;
  endedAt: string;
}

/** Where a run goes: the first page, and what the executor needs to mask secrets. */
export interface RunTarget {
  /** The first page: the app's URL plus `application_version.path`. */
  url: string;
  /** The app's URL (relative `navigate` URLs resolve against it). */
  appUrl: string;
  applicationId: string;
  environmentId?: string;
  /** The environment's repository, pull request and commit (the TestRun's `environment`, the report's header). */
  environment?: RunEnvironment;
  /** Every app of the environment (their secret bundles are masked in outputs). */
  apps: string[];
  /** Every app's URL in the environment, and the Environment Factory (preview.yaml, else the application). */
  urls?: Record<string, string>;
  factory?: FactoryLocation;
  /**
   * The origins the run's browser may load (run confinement): the app URLs' and the application's
   * `allowedOrigins` (`shared/origins.ts`, `runOrigins`).
   */
  origins?: string[];
  /** The environment's key, and whether its application protects it (the front door: core/access.ts). */
  envKey?: string;
  access?: AccessMode;
  /**
   * Where the service's own calls reach each app (past the front door): set by the executor from its runtime
   * (local: the apps' own ports, behind no front door); absent: `urls`. Never shown to the browser.
   */
  serviceUrls?: Record<string, string>;
}

export const runKey = (runId: string) => ({ runId });

/** A conditional update of run `runId` (`updateIf`): true when written, false when its condition failed. */
export function updateRunIf(runId: string, update: Omit<UpdateCommandInput, 'TableName' | 'Key'>) {
  return updateIf({ TableName: table('runs'), Key: runKey(runId), ...update });
}

/**
 * A run moving to `status`: the SET clauses of its status and three status keys (`#status` naming
 * `status`), and their values (`:status`, `:statusKey`, `:testStatusKey`, `:folderStatusKey`).
 */
export function statusWrite(run: Pick<RunItem, 'orgId' | 'testId' | 'folder'>, status: RunStatus) {
  const k = keys.runs.statusKeys({ orgId: run.orgId, testId: run.testId, folderId: run.folder.id, status });
  return {
    set: '#status = :status, statusKey = :statusKey, testStatusKey = :testStatusKey, folderStatusKey = :folderStatusKey',
    values: {
      ':status': status,
      ':statusKey': k.statusKey,
      ':testStatusKey': k.testStatusKey,
      ':folderStatusKey': k.folderStatusKey,
    },
  };
}

/** The stored run (any org), or undefined. */
export async function loadRun(runId: string): Promise<RunItem | undefined> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('runs'), Key: runKey(runId), ConsistentRead: true }),
  );
  if (!Item) return undefined;
  // Variables come back as a plain object; give them a null prototype like every other copy.
  const run = Item as RunItem;
  run.variables = Object.assign(Object.create(null), run.variables ?? {});
  return run;
}

/**
 * Media keys of a run: one screenshot per step, one video, one trace (a retry's:
 * core/runs/execution/media.ts).
 */
export const mediaKeys = {
  step: (run: Pick<RunItem, 'orgId' | 'runId'>, index: number, stepId: string) =>
    `runs/${run.orgId}/${run.runId}/step-${String(index + 1).padStart(3, '0')}-${stepId}.png`,
  video: (run: Pick<RunItem, 'orgId' | 'runId'>, extension: string) =>
    `runs/${run.orgId}/${run.runId}/video.${extension}`,
  /** The run's Playwright trace. */
  trace: (run: Pick<RunItem, 'orgId' | 'runId'>) => `runs/${run.orgId}/${run.runId}/trace.zip`,
};
