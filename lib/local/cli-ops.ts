import { parseArgs } from 'node:util';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import {
  environmentStatus,
  listEnvironments,
  type PreviewStatus,
} from '../../functions/core/environments.js';
import { appLogs, DEFAULT_TAIL_LINES, MAX_TAIL_LINES } from '../../functions/core/logs.js';
import {
  getRun,
  listRuns,
  RUN_STATUSES,
  type RunStatus,
  type TestRunView,
} from '../../functions/core/runs.js';
import type { Application } from '../../functions/core/tenancy.js';
import { runtime as cloudRuntime, secretStore } from '../../functions/ports/registry.js';
import { ProcessRuntime } from '../../functions/ports/runtime/local/process.js';
import type { Runtime } from '../../functions/ports/runtime/port.js';
import { GitSourceHost } from '../../functions/ports/source-host/local-git.js';
import { config } from '../../functions/shared/config.js';
import { ddb, table } from '../../functions/shared/dynamo.js';
import { APP_NAME_RE, repoFullName } from '../../functions/shared/validation.js';
import { defaultWorkDir } from './adapters.js';

/**
 * The operator's read commands of `previewctl` (lists, status, waits) and its help. cli.ts owns the
 * commands that write; these read the tables directly, as it does.
 */

/** A mistake in how the CLI was called: exit code 2. */
export class UsageError extends Error {}

export const OPS_USAGE = `  apps list --org ORG
      the organization's applications → {"applications":[{"applicationId","name","repoFullName",...}]}
  envs list --org ORG
      the organization's environments → {"environments":[{"repoFullName","prNumber","status",...}]}
  envs status --org ORG --repo owner/repo --pr N
      one environment's status (as GET /v1/preview/environments/{owner}/{repo}/{pr} answers it)
  envs logs --org ORG --repo owner/repo --pr N --app APP [--tail N] [--source app|build]
      the end of an app's output (default) or of its latest build's, as text on stdout, secret values
      masked: the last --tail lines (default ${DEFAULT_TAIL_LINES}, at most ${MAX_TAIL_LINES}), at most 1 MB (cut from
      the start under a notice); exit 1 with the error on stderr when there is none (docs/logs.md)
  envs wait --org ORG --repo owner/repo --pr N [--timeout SECONDS]
      poll until the environment is ready (exit 0) or failed (exit 1), a progress line on stderr per
      change; --timeout (default 600) ends the wait with exit 1
  runs list --org ORG [--test ID] [--status pending|running|passed|failed] [--limit N]
      the organization's test runs, newest first (default 20) → {"runs":[...]}
  runs get --org ORG --run ID
      one run with its steps
  runs wait --org ORG --run ID [--timeout SECONDS]
      poll until the run has passed (exit 0) or failed (exit 1), a progress line on stderr per change`;

export const OPS_COMMANDS = [
  'apps list',
  'envs list',
  'envs status',
  'envs logs',
  'envs wait',
  'runs list',
  'runs get',
  'runs wait',
] as const;

/** The command (`noun verb`) named by the first two positionals of `args`. */
function commandOf(args: string[]): string {
  return args
    .filter((a) => !a.startsWith('-'))
    .slice(0, 2)
    .join(' ');
}

/** Whether `args` name one of the commands of this file. */
export const isOpsCommand = (args: string[]) => (OPS_COMMANDS as readonly string[]).includes(commandOf(args));

/**
 * What `previewctl help [command]`, `previewctl --help` and `previewctl <command> --help` print (on stdout,
 * exit 0): the usage of that command where `usage` has it, else all of it. undefined when `args` ask for
 * no help.
 */
export function helpFor(args: string[], usage: string): string | undefined {
  let words: string[];
  if (args[0] === 'help') words = args.slice(1).filter((a) => !a.startsWith('-'));
  else if (args.includes('--help') || args.includes('-h')) words = args.filter((a) => !a.startsWith('-'));
  else return undefined;
  const command = words.slice(0, 2).join(' ');
  if (!command) return usage;
  const lines = usage.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`  ${command} `) || l === `  ${command}`);
  if (start < 0) return usage;
  let end = start + 1;
  while (end < lines.length && lines[end]!.startsWith('      ')) end++;
  return `usage: previewctl ${lines.slice(start, end).join('\n').trim()}`;
}

export interface OpsContext {
  /** Reach the data (cli.ts's `connect`): returns what closes it. */
  connect: () => Promise<() => Promise<void>>;
  /** The org id of `--org`, checked to exist (a UsageError otherwise). */
  requireOrg: (orgId: string | undefined) => Promise<string>;
  /** A progress line (stderr). */
  progress: (line: string) => void;
  /** How often the waits poll (tests make it short). */
  pollMs?: number;
}

/**
 * Run one of `OPS_COMMANDS`: what to print, and the exit code. `text`: print it as it is (without
 * `--json`), not `result`.
 */
export async function runOps(
  args: string[],
  ctx: OpsContext,
): Promise<{ result: Record<string, unknown>; code: number; text?: string }> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(args);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values } = parsed;
  const command = commandOf(args);
  if (values.repo !== undefined && !repoFullName.safeParse(values.repo).success)
    throw new UsageError('--repo must be owner/repo');
  const close = await ctx.connect();
  try {
    const orgId = await ctx.requireOrg(values.org);
    switch (command) {
      case 'apps list':
        return { result: { applications: await applicationsOf(orgId) }, code: 0 };
      case 'envs list':
        return { result: { environments: await listEnvironments(orgId) }, code: 0 };
      case 'envs status':
        return { result: { ...(await environmentStatus(envRef(orgId, values))) }, code: 0 };
      case 'envs logs': {
        const query = logQuery(values);
        const text = await appLogs(
          { runtime: logReader(), secrets: secretStore() },
          envRef(orgId, values),
          query,
        );
        return { result: { log: text }, code: 0, text };
      }
      case 'envs wait': {
        const ref = envRef(orgId, values);
        const label = `${ref.repoFullName}#${ref.prNumber}`;
        const status = await waitFor(
          () => environmentStatus(ref),
          (s: PreviewStatus) => ['ready', 'failed', 'torn_down'].includes(s.status),
          (s) => `${label}: ${s.status}${s.phase ? ` (${s.phase})` : ''}`,
          timeoutOf(values.timeout),
          ctx,
        );
        if (!status) return { result: { error: `${label} did not settle in time` }, code: 1 };
        return { result: { ...status }, code: status.status === 'ready' ? 0 : 1 };
      }
      case 'runs list': {
        const status = values.status as RunStatus | undefined;
        if (status !== undefined && !RUN_STATUSES.includes(status))
          throw new UsageError(`--status must be one of ${RUN_STATUSES.join(', ')}`);
        const limit = values.limit === undefined ? 20 : Number(values.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
          throw new UsageError('--limit must be an integer from 1 to 1000');
        const runs = await listRuns(
          orgId,
          { testId: values.test, status },
          { limit, offset: 0 },
          { media: false, steps: false },
        );
        return { result: { runs }, code: 0 };
      }
      case 'runs get':
        return {
          result: { ...(await getRun(orgId, runId(values), { media: false, steps: true })) },
          code: 0,
        };
      default: {
        const id = runId(values);
        const run = await waitFor(
          () => getRun(orgId, id, { media: false, steps: true }),
          (r: TestRunView) => r.status === 'passed' || r.status === 'failed',
          (r) => `run ${id}: ${r.status}`,
          timeoutOf(values.timeout),
          ctx,
        );
        if (!run) return { result: { error: `run ${id} did not end in time` }, code: 1 };
        return { result: { ...run }, code: run.status === 'passed' ? 0 : 1 };
      }
    }
  } finally {
    await close();
  }
}

function parse(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      org: { type: 'string' },
      repo: { type: 'string' },
      pr: { type: 'string' },
      run: { type: 'string' },
      test: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      timeout: { type: 'string' },
      app: { type: 'string' },
      tail: { type: 'string' },
      source: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
}

type Values = ReturnType<typeof parse>['values'];

function envRef(orgId: string, values: Values) {
  if (!values.repo) throw new UsageError('--repo is required');
  if (values.pr === undefined || !/^\d+$/.test(values.pr)) throw new UsageError('--pr must be a number');
  return { orgId, repoFullName: values.repo, prNumber: Number(values.pr) };
}

/** `envs logs`' options, checked as the API checks `tail` and `source`. */
function logQuery(values: Values) {
  if (!values.app || !APP_NAME_RE.test(values.app)) throw new UsageError('--app must be an app name');
  const tail = values.tail === undefined ? DEFAULT_TAIL_LINES : Number(values.tail);
  if (!/^\d+$/.test(values.tail ?? '1') || tail < 1 || tail > MAX_TAIL_LINES)
    throw new UsageError(`--tail must be a whole number of lines from 1 to ${MAX_TAIL_LINES}`);
  const source = values.source ?? 'app';
  if (source !== 'app' && source !== 'build') throw new UsageError('--source must be app or build');
  return { app: values.app, tail, source: source as 'app' | 'build' };
}

/**
 * What reads logs: in AWS mode the cloud runtime; locally a runtime over the data dir's log files that is
 * never started nor stopped (stopping the registry's would stop the running server's apps).
 */
function logReader(): Runtime {
  const c = config();
  if (c.mode === 'aws') return cloudRuntime();
  return new ProcessRuntime({
    dataDir: c.dataDir!,
    workDir: c.workDir ?? defaultWorkDir(c.dataDir!),
    sourceHost: new GitSourceHost(c.gitRoot!),
    complete: async () => undefined,
    readyTimeoutMs: 0,
  });
}

function runId(values: Values): string {
  if (!values.run) throw new UsageError('--run is required');
  return values.run;
}

function timeoutOf(raw: string | undefined): number {
  if (raw === undefined) return 600_000;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError('--timeout must be a number of seconds');
  return n * 1000;
}

/** Poll `read` until `done`, a progress line per change of `line`; undefined when `timeoutMs` passes. */
async function waitFor<T>(
  read: () => Promise<T>,
  done: (v: T) => boolean,
  line: (v: T) => string,
  timeoutMs: number,
  ctx: OpsContext,
): Promise<T | undefined> {
  const started = Date.now();
  let last = '';
  for (;;) {
    const value = await read();
    const now = line(value);
    if (now !== last) {
      ctx.progress(`${now} (${Math.round((Date.now() - started) / 1000)} s)`);
      last = now;
    }
    if (done(value)) return value;
    if (Date.now() - started > timeoutMs) return undefined;
    await new Promise((r) => setTimeout(r, ctx.pollMs ?? 1_000));
  }
}

/** The org's applications (a scan filtered by org: the table has no index by org; fine for an operator). */
async function applicationsOf(orgId: string) {
  const out: Record<string, unknown>[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const res = await ddb().send(
      new ScanCommand({
        TableName: table('applications'),
        FilterExpression: 'orgId = :o',
        ExpressionAttributeValues: { ':o': orgId },
        ExclusiveStartKey: startKey,
      }),
    );
    for (const app of (res.Items ?? []) as Application[]) {
      out.push({
        applicationId: app.applicationId,
        name: app.name,
        repoFullName: app.repoFullName ?? null,
        disabled: app.disabled,
        installationActive: app.installationActive,
        ttlHours: app.ttlHours ?? 72,
        deployDrafts: app.deployDrafts ?? false,
        allowedOrigins: app.allowedOrigins ?? [],
        createdAt: app.createdAt,
      });
    }
    startKey = res.LastEvaluatedKey;
  } while (startKey);
  return out.sort((a, b) => String(a.createdAt).localeCompare(String(b.createdAt)));
}
