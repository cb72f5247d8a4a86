import { BatchGetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { DeploymentState, PrReport, PrStatus } from '../../ports/pr-status/port.js';
import { ddb, table } from '../../shared/aws/dynamo.js';
import { sha256Hex } from '../../shared/crypto.js';
import { log } from '../../shared/log.js';
import { findEnvironment } from './lifecycle.js';
import type { Environment } from './types.js';

/** A test run as the PR comment lists it. */
export interface TestRunLine {
  name: string;
  status: string;
  runId: string;
  createdAt: string;
  /** How many of its steps were healed (their recorded selector matched nothing); absent: none. */
  healedSteps?: number;
}

export interface ReportDeps {
  prStatus: PrStatus;
  /** The latest test runs of an environment (default: `latestTestRuns`). */
  testRuns?: (env: Environment) => Promise<TestRunLine[]>;
  /**
   * The signed access links of a protected, ready environment (the front door: core/environments.ts
   * `environmentAccessUrls`), shown in its comment. Absent: none shown.
   */
  accessUrls?: (env: Environment) => Promise<Record<string, string> | undefined>;
}

export type ReportOutcome = 'published' | 'skipped' | 'failed';

/** The organization's tag on GitHub: a hash, so a public comment or deployment never shows its id. */
export const ownerTag = (orgId: string): string => sha256Hex(`preview-org:${orgId}`).slice(0, 12);

/** The GitHub environment name of an environment. */
export const githubEnvironment = (env: Pick<Environment, 'prNumber' | 'inputs'>): string =>
  env.prNumber > 0 ? `preview/pr-${env.prNumber}` : `preview/${env.inputs?.headRef ?? 'main'}`;

function stateOf(env: Environment): DeploymentState | undefined {
  if (env.status === 'torn_down') return 'inactive';
  // A teardown is under way: its step reports `inactive` once it is done.
  if (env.tornDownRequested) return undefined;
  if (env.status === 'ready') return 'success';
  if (env.status === 'failed') return 'failure';
  return 'in_progress';
}

/** The URL GitHub links from the deployment: the app named `web`, else the first by name. */
function primaryUrl(urls: Record<string, string>): string | undefined {
  return (
    urls.web ??
    Object.keys(urls)
      .sort()
      .map((k) => urls[k])[0]
  );
}

const FORK_NOTE =
  "This pull request comes from a fork: its preview runs without the application's secret bundles.";

/**
 * The comment's text (Markdown) for an environment. A protected one's apps each get their signed access
 * link (`access`: app → link), never the access key.
 */
export function renderComment(
  env: Environment,
  state: DeploymentState,
  runs: TestRunLine[] = [],
  access?: Record<string, string>,
): string {
  const headline: Record<DeploymentState, string> = {
    in_progress: 'deploying',
    success: 'ready',
    failure: 'failed',
    inactive: 'torn down',
  };
  const sha = env.inputs?.headSha ?? env.lastDeployedSha;
  const lines = [
    `### Preview environment: ${headline[state]}`,
    '',
    `| | |`,
    `|---|---|`,
    `| Status | \`${env.status}\` |`,
    `| Phase | ${env.phase ? `\`${env.phase}\`` : '—'} |`,
    ...(sha ? [`| Commit | \`${sha.slice(0, 12)}\` |`] : []),
  ];
  const urls = Object.entries(env.urls ?? {}).sort(([a], [b]) => a.localeCompare(b));
  const links = state === 'success' && access && Object.keys(access).length ? access : undefined;
  if (urls.length && state !== 'inactive' && links) {
    lines.push(
      '',
      '| App | URL | Access link |',
      '|---|---|---|',
      ...urls.map(
        ([app, url]) => `| ${app} | ${url} | ${links[app] ? `[open ${app}](${links[app]})` : '—'} |`,
      ),
      '',
      `> This preview is protected: open an app with its access link (good for 7 days; it lets that browser in). ` +
        `\`previewctl envs open --repo ${env.repoFullName} --pr ${env.prNumber}\` prints fresh ones.`,
    );
  } else if (urls.length && state !== 'inactive') {
    lines.push('', '| App | URL |', '|---|---|', ...urls.map(([app, url]) => `| ${app} | ${url} |`));
  }
  if (state === 'inactive' && env.teardownReason) {
    lines.push('', `**Why**: ${env.teardownReason} (the application's preview rules).`);
  }
  if (state === 'failure' && env.error) {
    lines.push('', '**Why it failed**', '', '```text', env.error.replace(/```/g, "'''"), '```');
  }
  if (env.inputs?.fork) lines.push('', `> ${FORK_NOTE}`);
  if (runs.length) {
    lines.push(
      '',
      '**Latest test runs**',
      '',
      '| Test | Status | Run | Started |',
      '|---|---|---|---|',
      ...runs.map(
        (r) =>
          `| ${r.name.replace(/\|/g, '\\|')} | \`${r.status}\`${r.healedSteps ? ` (${r.healedSteps} healed)` : ''} | \`${r.runId}\` | ${r.createdAt} |`,
      ),
    );
  }
  lines.push('', `<sub>Updated ${env.updatedAt} · generation ${env.generation}</sub>`);
  return lines.join('\n');
}

/** The deployment status's description (GitHub keeps 140 characters). */
function describe(env: Environment, state: DeploymentState): string {
  const fork = env.inputs?.fork ? ' (fork: no secret bundles)' : '';
  switch (state) {
    case 'success':
      return `Preview ready: ${Object.keys(env.urls ?? {}).length} app(s)${fork}`;
    case 'failure':
      return `Preview failed: ${env.error ?? 'unknown failure'}`.slice(0, 140);
    case 'inactive':
      return env.teardownReason
        ? `Preview torn down: ${env.teardownReason}`.slice(0, 140)
        : 'Preview torn down';
    default:
      return `Preview ${env.status}${env.phase ? ` (${env.phase})` : ''}${fork}`;
  }
}

/** The report for an environment as it is now, or why there is none to make. */
export function buildReport(
  env: Environment,
  runs: TestRunLine[] = [],
  access?: Record<string, string>,
): { report: PrReport } | { skip: string } {
  const state = stateOf(env);
  if (!state) return { skip: 'a teardown is in progress' };
  const sha = env.inputs?.headSha ?? env.lastDeployedSha;
  if (!sha) return { skip: 'the environment has no commit yet' };
  const url = state === 'success' ? primaryUrl(env.urls ?? {}) : undefined;
  return {
    report: {
      repoFullName: env.repoFullName,
      prNumber: env.prNumber,
      sha,
      environment: githubEnvironment(env),
      state,
      description: describe(env, state),
      ...(url ? { environmentUrl: url } : {}),
      ownerTag: ownerTag(env.orgId),
      ...(env.prNumber > 0 ? { comment: renderComment(env, state, runs, access) } : {}),
      version: { generation: env.generation, at: env.updatedAt },
    },
  };
}

/**
 * The latest run of each test that ran against this environment, newest first (at most 10): the org's
 * newest runs whose `application_version_id` names the environment (its `environmentId`); none for an
 * environment without one (records from before environments had ids).
 */
export async function latestTestRuns(env: Environment): Promise<TestRunLine[]> {
  const environmentId = env.environmentId;
  if (!environmentId) return [];
  const { Items } = await ddb().send(
    new QueryCommand({
      TableName: table('runs'),
      IndexName: 'listOrg',
      KeyConditionExpression: 'orgId = :org',
      ExpressionAttributeValues: { ':org': env.orgId },
      ScanIndexForward: false,
      Limit: 100,
    }),
  );
  const seen = new Set<string>();
  const lines: TestRunLine[] = [];
  for (const run of (Items ?? []) as {
    runId: string;
    testId: string;
    name: string;
    status: string;
    createdAt: string;
    applicationVersionId?: string;
  }[]) {
    if (run.applicationVersionId !== environmentId || seen.has(run.testId)) continue;
    seen.add(run.testId);
    lines.push({ name: run.name, status: run.status, runId: run.runId, createdAt: run.createdAt });
    if (lines.length === 10) break;
  }
  return withHealedCounts(lines);
}

/**
 * The lines with each run's healed step count, read by id (the org's listing index does not carry it,
 * and changing an index's projection replaces it): one BatchGetItem of at most 10 keys. Best effort: a
 * read that fails leaves the lines unmarked.
 */
async function withHealedCounts(lines: TestRunLine[]): Promise<TestRunLine[]> {
  if (!lines.length) return lines;
  const name = table('runs');
  try {
    const out = await ddb().send(
      new BatchGetCommand({
        RequestItems: {
          [name]: {
            Keys: lines.map((l) => ({ runId: l.runId })),
            ProjectionExpression: 'runId, healedSteps',
          },
        },
      }),
    );
    const healed = new Map<string, number>();
    for (const item of (out.Responses?.[name] ?? []) as { runId: string; healedSteps?: number }[])
      if (item.healedSteps) healed.set(item.runId, item.healedSteps);
    return lines.map((l) => (healed.has(l.runId) ? { ...l, healedSteps: healed.get(l.runId)! } : l));
  } catch (err) {
    log.warn('could not read the healed steps of the latest test runs', { error: (err as Error).name });
    return lines;
  }
}

/**
 * Show an environment's state on its pull request (status on the PR): a GitHub deployment status for its
 * commit (`in_progress`, `success` with the URL, `failure` with the error, `inactive` once torn down) and
 * the PR comment (env 0 gets no comment: it has no pull request).
 * Steps: read the environment (consistently); when `generation` is given and is no longer current, do
 * nothing (a superseded execution never reports); build the report from what is stored now, so whoever
 * reports last shows the newest state; publish it, the adapter refusing a report older than the one
 * shown. Best effort: a failure is logged and never thrown, so no pipeline step fails over it.
 */
export async function reportStatus(
  deps: ReportDeps,
  ref: Pick<Environment, 'orgId' | 'envKey'> & { generation?: number },
): Promise<ReportOutcome> {
  try {
    const env = await findEnvironment(ref.orgId, ref.envKey);
    if (!env) return 'skipped';
    if (ref.generation !== undefined && env.generation !== ref.generation) return 'skipped';
    let runs: TestRunLine[] = [];
    try {
      runs = await (deps.testRuns ?? latestTestRuns)(env);
    } catch (err) {
      log.warn('could not read the latest test runs for the PR status', {
        envKey: env.envKey,
        error: (err as Error).name,
      });
    }
    let access: Record<string, string> | undefined;
    if (env.status === 'ready' && env.prNumber > 0 && deps.accessUrls)
      access = await deps.accessUrls(env).catch((err: Error) => {
        log.warn('could not sign the access links for the PR comment', {
          envKey: env.envKey,
          error: err.name,
        });
        return undefined;
      });
    const built = buildReport(env, runs, access);
    if ('skip' in built) return 'skipped';
    const outcome = await deps.prStatus.publish(built.report);
    if (!outcome.published) {
      log.info('PR status not published', { envKey: env.envKey, reason: outcome.reason });
      return 'skipped';
    }
    return 'published';
  } catch (err) {
    log.warn('could not report status on the pull request', {
      envKey: ref.envKey,
      error: (err as Error).name,
      reason: (err as Error).message?.slice(0, 300),
    });
    return 'failed';
  }
}
