import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { type ApiTarget, api, path } from './api.js';
import { type Parsed, UsageError } from './args.js';
import { parseEnvFile } from './env-file.js';
import { short, table, when } from './format.js';
import { redeployAll } from './redeploy-all.js';
import {
  APP_COLUMNS,
  ENV_COLUMNS,
  type Env,
  environmentRows,
  envText,
  type Json,
  RUN_COLUMNS,
  runText,
} from './views.js';

export { ENV_COLUMNS, type Env, environmentRows } from './views.js';

/*
 * previewctl's API commands: each is one or a few calls of the service's HTTP API, what the API answers
 * (`result`, printed with --json) and what a person reads (`text`).
 */

export interface Outcome {
  result: Record<string, unknown>;
  /** For people (without --json). */
  text: string;
  code: number;
}

export interface CommandContext {
  target: ApiTarget;
  /** A progress line on stderr (waits). */
  progress: (line: string) => void;
  /** How often waits poll. @default 1000 */
  pollMs?: number;
}

const REPO_RE = /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/;
const APP_RE = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;
/** The most lines a log read answers (MAX_TAIL_LINES of functions/core/logs.ts; a unit test holds them equal). */
export const MAX_TAIL_LINES = 10_000;
const ENV_STATUSES = ['pending', 'building', 'deploying', 'ready', 'failed', 'torn_down'];
const RUN_STATUSES = ['pending', 'running', 'passed', 'failed'];

const str = (p: Parsed, name: string) => p.values[name] as string | undefined;

function repoOf(p: Parsed, required = true): string | undefined {
  const repo = str(p, 'repo');
  if (repo === undefined) {
    if (required) throw new UsageError(`${p.command.name} needs --repo owner/repo`);
    return undefined;
  }
  if (!REPO_RE.test(repo)) throw new UsageError('--repo must be owner/repo');
  return repo;
}

function envOf(p: Parsed): { repo: string; pr: number; path: string; label: string } {
  const repo = repoOf(p)!;
  const pr = str(p, 'pr');
  if (pr === undefined) throw new UsageError(`${p.command.name} needs --pr N`);
  if (!/^\d{1,9}$/.test(pr)) throw new UsageError('--pr must be a whole number (0: the main branch)');
  return {
    repo,
    pr: Number(pr),
    path: `/v1/preview/environments/${repo.split('/').map(encodeURIComponent).join('/')}/${Number(pr)}`,
    label: `${repo}#${Number(pr)}`,
  };
}

function appArg(p: Parsed): string {
  const app = p.positionals[0] ?? str(p, 'app');
  if (app === undefined) throw new UsageError(`${p.command.name} needs APP`);
  if (!APP_RE.test(app)) throw new UsageError(`${app} is not an app name (lower-case letters, digits, -)`);
  return app;
}

function timeoutOf(p: Parsed): number {
  const raw = str(p, 'timeout');
  if (raw === undefined) return 600_000;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError('--timeout must be a number of seconds');
  return n * 1000;
}

/**
 * The checks of `p`'s arguments that need no API call (run before the API is looked for, so a usage
 * error is one whether or not a server runs).
 */
export function checkArgs(p: Parsed): void {
  const name = p.command.name;
  repoOf(p, false);
  if (name === 'envs redeploy' && p.values.all === true) {
    if (str(p, 'pr') !== undefined)
      throw new UsageError('envs redeploy --all takes no --pr (--repo narrows it)');
  } else if ((name.startsWith('envs ') && name !== 'envs list') || name === 'gate skip') envOf(p);
  if (p.values['dry-run'] === true && p.values.all !== true)
    throw new UsageError('--dry-run goes with envs redeploy --all');
  if (/^(envs (restart|rebuild|logs)|secrets )/.test(name)) appArg(p);
  if (name === 'secrets set') secretItems(p);
  if (/^runs (get|report|wait)$/.test(name)) runArg(p);
  if (str(p, 'timeout') !== undefined) timeoutOf(p);
  const tail = str(p, 'tail');
  if (tail !== undefined && (!/^\d{1,6}$/.test(tail) || Number(tail) < 1 || Number(tail) > MAX_TAIL_LINES))
    throw new UsageError(`--tail must be a whole number of lines from 1 to ${MAX_TAIL_LINES}`);
  const source = str(p, 'source');
  if (source !== undefined && source !== 'app' && source !== 'build')
    throw new UsageError('--source must be app or build');
  const status = str(p, 'status');
  const statuses = name === 'envs list' ? ENV_STATUSES : RUN_STATUSES;
  if (status !== undefined && !statuses.includes(status))
    throw new UsageError(`--status must be one of ${statuses.join(', ')}`);
}

/** Run the API command `p` names. */
export async function runApiCommand(p: Parsed, ctx: CommandContext): Promise<Outcome> {
  const t = ctx.target;
  switch (p.command.name) {
    case 'apps list': {
      const { applications } = await api<{ applications: Record<string, unknown>[] }>(
        t,
        'apiKey',
        'GET',
        '/v1/preview/applications',
      );
      return ok({ applications }, table(applications, APP_COLUMNS, 'no applications'));
    }
    case 'envs list': {
      const repo = repoOf(p, false);
      const status = str(p, 'status');
      if (status !== undefined && !ENV_STATUSES.includes(status))
        throw new UsageError(`--status must be one of ${ENV_STATUSES.join(', ')}`);
      const { environments } = await api<{ environments: Env[] }>(
        t,
        'apiKey',
        'GET',
        '/v1/preview/environments',
      );
      const rows = environmentRows(environments, { repo, status });
      return ok({ environments: rows }, table(rows, ENV_COLUMNS, 'no environments'));
    }
    case 'envs status': {
      const env = await api<Env>(t, 'apiKey', 'GET', envOf(p).path);
      return ok({ ...env }, envText(env));
    }
    case 'envs open': {
      const e = envOf(p);
      const env = await api<Env>(t, 'apiKey', 'GET', e.path);
      const urls = Object.entries(env.urls).sort(([a], [b]) => a.localeCompare(b));
      if (urls.length === 0)
        return {
          result: { ...env },
          text: `${e.label} has no URLs (status ${env.status}${env.error ? `: ${env.error}` : ''})`,
          code: 1,
        };
      // A protected preview: the signed link of each app, which lets a browser in (it sets the cookie).
      const links = env.accessUrls;
      if (links)
        return ok(
          { urls: env.urls, accessUrls: links },
          urls.map(([app, url]) => `${app}  ${links[app] ?? url}`).join('\n'),
        );
      return ok({ urls: env.urls }, urls.map(([app, url]) => `${app}  ${url}`).join('\n'));
    }
    case 'envs wait': {
      const e = envOf(p);
      return waitEnv(ctx, e, timeoutOf(p));
    }
    case 'envs deploy': {
      const e = envOf(p);
      if (e.pr < 1) throw new UsageError('--pr must be 1 or more (0, the main branch, deploys with its app)');
      const { sha, branch } = await headOf(p, t, e.repo);
      const res = await api(t, 'apiKey', 'POST', '/v1/preview/environments', {
        repoFullName: e.repo,
        prNumber: e.pr,
        headSha: sha,
        headRef: branch,
      });
      return afterAccepted(
        p,
        ctx,
        e,
        { ...res, headSha: sha, headRef: branch },
        `deploying ${e.label} at ${short(sha)} (${branch})`,
      );
    }
    case 'envs redeploy': {
      if (p.values.all === true)
        return redeployAll(p, { target: t, wait: (e) => waitEnv(ctx, e, timeoutOf(p)) });
      const e = envOf(p);
      const res = await api(t, 'apiKey', 'PATCH', e.path);
      return afterAccepted(p, ctx, e, res, `redeploying ${e.label}`);
    }
    case 'envs restart':
    case 'envs rebuild': {
      const e = envOf(p);
      const app = appArg(p);
      const mode = p.command.name === 'envs restart' ? 'restart' : 'rebuild';
      const res = await api(t, 'apiKey', 'PATCH', `${e.path}/apps/${app}`, { mode });
      return afterAccepted(
        p,
        ctx,
        e,
        res,
        `${mode === 'restart' ? 'restarting' : 'rebuilding'} ${app} of ${e.label}`,
      );
    }
    case 'envs delete': {
      const e = envOf(p);
      const res = await api(t, 'apiKey', 'DELETE', e.path);
      return ok(res, `tearing down ${e.label}`);
    }
    case 'envs logs': {
      const e = envOf(p);
      const app = appArg(p);
      const query = new URLSearchParams();
      if (str(p, 'tail') !== undefined) query.set('tail', str(p, 'tail')!);
      if (str(p, 'source') !== undefined) query.set('source', str(p, 'source')!);
      const q = query.size ? `?${query}` : '';
      const log = await api<string>(t, 'apiKey', 'GET', `${e.path}/apps/${app}/logs${q}`, undefined, {
        text: true,
      });
      return { result: { log }, text: log.replace(/\n$/, ''), code: 0 };
    }
    case 'secrets list': {
      const app = appArg(p);
      const appId = await applicationOf(p, t);
      const res = await api<{ keys: { key: string; maskedLength: number; updatedAt: string }[] }>(
        t,
        'apiKey',
        'GET',
        `/v1/preview/secrets/${path(appId, app)}`,
      );
      return ok(
        res,
        table(
          res.keys,
          [
            { header: 'KEY', value: (k) => k.key },
            { header: 'LENGTH', value: (k) => k.maskedLength, right: true },
            { header: 'UPDATED', value: (k) => when(k.updatedAt) },
          ],
          `no secrets for ${app}`,
        ),
      );
    }
    case 'secrets set': {
      const app = appArg(p);
      const items = secretItems(p);
      const appId = await applicationOf(p, t);
      const res = await api<Record<string, unknown>>(
        t,
        'apiKey',
        'PUT',
        `/v1/preview/secrets/${path(appId, app)}`,
        {
          items,
        },
      );
      const warning = typeof res.warning === 'string' ? `\nwarning: ${res.warning}` : '';
      return ok(
        res,
        `saved ${items.map((i) => i.key).join(', ')} for ${app}; running apps get them when they restart ` +
          `(previewctl envs restart ${app} --repo … --pr …)${warning}`,
      );
    }
    case 'secrets unset': {
      const app = appArg(p);
      const key = p.positionals[1]!;
      const appId = await applicationOf(p, t);
      const res = await api(t, 'apiKey', 'DELETE', `/v1/preview/secrets/${path(appId, app, key)}`);
      return ok(res, `deleted ${key} of ${app}`);
    }
    case 'tests list': {
      const folder = str(p, 'folder');
      const q = folder !== undefined ? `?${new URLSearchParams({ folder })}` : '';
      const tests = await api<Json[]>(t, 'client', 'GET', `/test${q}`);
      return ok(
        { tests },
        table(
          tests,
          [
            { header: 'ID', value: (x) => x.id },
            { header: 'NAME', value: (x) => x.name, max: 40 },
            { header: 'FOLDER', value: (x) => x.folder?.name },
            { header: 'APPLICATION', value: (x) => x.application_id },
            { header: 'CREATED', value: (x) => when(x.created_at) },
          ],
          'no tests',
        ),
      );
    }
    case 'tests quarantine': {
      const owner = str(p, 'owner');
      const reason = str(p, 'reason');
      if (!owner?.trim() || !reason?.trim())
        throw new UsageError('tests quarantine needs --owner NAME and --reason TEXT');
      const until = str(p, 'until');
      const q = await api<Json>(t, 'client', 'PUT', `/test/${path(p.positionals[0]!)}/quarantine`, {
        owner,
        reason,
        ...(until !== undefined ? { until } : {}),
      });
      return ok(q, `${q.test_id} quarantined until ${q.until} (owner ${q.owner})`);
    }
    case 'tests unquarantine': {
      const q = await api<Json>(t, 'client', 'DELETE', `/test/${path(p.positionals[0]!)}/quarantine`);
      return ok(q, `${q.test_id} is no longer quarantined`);
    }
    case 'tests quarantined': {
      const app = str(p, 'application');
      const q = app !== undefined ? `?${new URLSearchParams({ application_id: app })}` : '';
      const { quarantined } = await api<{ quarantined: Json[] }>(t, 'client', 'GET', `/quarantine${q}`);
      return ok(
        { quarantined },
        table(
          quarantined,
          [
            { header: 'TEST', value: (x) => x.test_id },
            { header: 'NAME', value: (x) => x.test_name, max: 30 },
            { header: 'OWNER', value: (x) => x.owner },
            { header: 'UNTIL', value: (x) => String(x.until).slice(0, 10) },
            { header: 'REASON', value: (x) => x.reason, max: 40 },
          ],
          'no quarantined tests',
        ),
      );
    }
    case 'gate skip': {
      const e = envOf(p);
      const reason = str(p, 'reason');
      if (!reason?.trim()) throw new UsageError('gate skip needs --reason TEXT: a skip always says why');
      const by = str(p, 'by') ?? userInfo().username;
      const res = await api<Json>(t, 'apiKey', 'POST', `${e.path}/gate/skip`, { reason, by });
      return ok(
        res,
        `${e.label} at ${String(res.sha).slice(0, 12)}: ${res.title} (${res.conclusion ?? 'pending'})`,
      );
    }
    case 'runs start': {
      const test = p.positionals[0]!;
      const vars: Record<string, string> = {};
      for (const v of (p.values.var as string[] | undefined) ?? []) {
        const eq = v.indexOf('=');
        if (eq < 1) throw new UsageError(`--var ${v}: must be NAME=VALUE`);
        vars[v.slice(0, eq)] = v.slice(eq + 1);
      }
      const body: Record<string, unknown> = { source: 'cli' };
      if (str(p, 'env') !== undefined) body.application_version_id = str(p, 'env');
      if (Object.keys(vars).length) body.runtime_metadata = vars;
      const res = await api<{ run_id: string; url: string }>(
        t,
        'client',
        'POST',
        `/test/${path(test)}/run`,
        body,
      );
      if (!p.values.wait) return ok(res, `run ${res.run_id} started\nreport: ${res.url}`);
      ctx.progress(`run ${res.run_id} started; report: ${res.url}`);
      return waitRun(ctx, res.run_id, timeoutOf(p));
    }
    case 'runs list': {
      const status = str(p, 'status');
      if (status !== undefined && !RUN_STATUSES.includes(status))
        throw new UsageError(`--status must be one of ${RUN_STATUSES.join(', ')}`);
      const limit = str(p, 'limit') ?? '20';
      if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 100)
        throw new UsageError('--limit must be a whole number from 1 to 100');
      const query = new URLSearchParams({ limit });
      if (str(p, 'test') !== undefined) query.set('test', str(p, 'test')!);
      if (status !== undefined) query.set('status', status);
      const runs = await api<Json[]>(t, 'client', 'GET', `/run?${query}`);
      return ok({ runs }, table(runs, RUN_COLUMNS, 'no runs'));
    }
    case 'runs get': {
      const run = await api<Json>(t, 'client', 'GET', `/run/${path(runArg(p))}?steps=true`);
      return ok(run, runText(run));
    }
    case 'runs report': {
      const run = await api<Json>(t, 'client', 'GET', `/run/${path(runArg(p))}`);
      return ok({ id: run.id, status: run.status, report_url: run.report_url }, String(run.report_url));
    }
    case 'runs wait':
      return waitRun(ctx, runArg(p), timeoutOf(p));
    default:
      throw new UsageError(`${p.command.name} is not an API command`);
  }
}

const ok = (result: Record<string, unknown>, text: string): Outcome => ({ result, text, code: 0 });

function runArg(p: Parsed): string {
  const run = p.positionals[0] ?? str(p, 'run');
  if (run === undefined) throw new UsageError(`${p.command.name} needs RUN (a run id)`);
  return run;
}

/** After a 202: the answer, or with --wait the wait for the environment to settle. */
async function afterAccepted(
  p: Parsed,
  ctx: CommandContext,
  e: { path: string; label: string },
  res: Record<string, unknown>,
  what: string,
): Promise<Outcome> {
  if (!p.values.wait)
    return ok(res, `${what}; follow it with previewctl envs wait --repo ${e.label.replace('#', ' --pr ')}`);
  ctx.progress(what);
  return waitEnv(ctx, e, timeoutOf(p));
}

async function waitEnv(
  ctx: CommandContext,
  e: { path: string; label: string },
  timeoutMs: number,
): Promise<Outcome> {
  const env = await waitFor(
    () => api<Env>(ctx.target, 'apiKey', 'GET', e.path),
    (s) => ['ready', 'failed', 'torn_down'].includes(s.status),
    (s) => `${e.label}: ${s.status}${s.phase ? ` (${s.phase})` : ''}`,
    timeoutMs,
    ctx,
  );
  if (!env)
    return {
      result: { error: `${e.label} did not settle in time` },
      text: `${e.label} did not settle in time`,
      code: 1,
    };
  return { result: { ...env }, text: envText(env), code: env.status === 'ready' ? 0 : 1 };
}

async function waitRun(ctx: CommandContext, id: string, timeoutMs: number): Promise<Outcome> {
  const run = await waitFor(
    () => api<Json>(ctx.target, 'client', 'GET', `/run/${path(id)}?steps=true`),
    (r) => r.status === 'passed' || r.status === 'failed',
    (r) => `run ${id}: ${r.status}`,
    timeoutMs,
    ctx,
  );
  if (!run)
    return {
      result: { error: `run ${id} did not end in time` },
      text: `run ${id} did not end in time`,
      code: 1,
    };
  return { result: run, text: runText(run), code: run.status === 'passed' ? 0 : 1 };
}

/** Poll `read` until `done`, a progress line per change of `line`; undefined when `timeoutMs` passes. */
async function waitFor<T>(
  read: () => Promise<T>,
  done: (v: T) => boolean,
  line: (v: T) => string,
  timeoutMs: number,
  ctx: CommandContext,
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

/**
 * The commit and branch to deploy. Locally: the branch is --branch, else the repository's checked-out
 * branch (the local source host has no pull requests); the commit is --sha, else that branch's head.
 * Through PREVIEW_API_URL both must be given.
 */
async function headOf(p: Parsed, t: ApiTarget, repo: string): Promise<{ sha: string; branch: string }> {
  const sha = str(p, 'sha');
  let branch = str(p, 'branch');
  if (sha !== undefined && !/^[0-9a-f]{7,40}$/i.test(sha))
    throw new UsageError('--sha must be a commit (7 to 40 hex digits)');
  if (!t.local) {
    if (sha === undefined || branch === undefined)
      throw new UsageError('envs deploy through PREVIEW_API_URL needs --sha SHA and --branch BRANCH');
    return { sha, branch };
  }
  const dir = join(t.local.gitRoot, ...repo.split('/'));
  if (!existsSync(dir))
    throw new UsageError(
      `no repository ${repo} under ${t.local.gitRoot} (the local source host, PREVIEW_GIT_ROOT)`,
    );
  branch ??= (await git(dir, ['symbolic-ref', '--quiet', '--short', 'HEAD']))?.trim();
  if (!branch) throw new UsageError(`${repo} has no branch checked out: pass --branch BRANCH (or --sha)`);
  if (sha !== undefined) return { sha, branch };
  const head = (
    await git(dir, ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`])
  )?.trim();
  if (!head) throw new UsageError(`branch ${branch} not found in ${repo} (${dir})`);
  return { sha: head, branch };
}

function git(dir: string, args: string[]): Promise<string | undefined> {
  return new Promise((ok) =>
    execFile('git', ['-C', dir, ...args], (err, stdout) => ok(err ? undefined : stdout)),
  );
}

/** The application whose secrets: --application, else the one linked to --repo, else the only one. */
async function applicationOf(p: Parsed, t: ApiTarget): Promise<string> {
  const id = str(p, 'application');
  if (id !== undefined) return id;
  const repo = repoOf(p, false);
  const q = repo !== undefined ? `?${new URLSearchParams({ repo })}` : '';
  const { applications } = await api<{
    applications: { applicationId: string; repoFullName: string | null }[];
  }>(t, 'apiKey', 'GET', `/v1/preview/applications${q}`);
  if (applications.length === 1) return applications[0]!.applicationId;
  if (applications.length === 0)
    throw new UsageError(
      repo !== undefined
        ? `no application of this organization links ${repo} (previewctl apps create --repo ${repo})`
        : 'this organization has no application (previewctl apps create)',
    );
  throw new UsageError(
    `this organization has ${applications.length} applications: pass --repo owner/repo or --application ID ` +
      `(${applications.map((a) => `${a.applicationId} ${a.repoFullName ?? 'unlinked'}`).join(', ')})`,
  );
}

/** `KEY=VALUE` positionals, or the secrets of --from-env-file (env-file.ts). */
export function secretItems(p: Parsed): { key: string; value: string }[] {
  const file = str(p, 'from-env-file');
  const pairs = p.positionals.slice(1);
  if (file !== undefined && pairs.length)
    throw new UsageError('secrets set takes KEY=VALUE arguments or --from-env-file FILE, not both');
  const items: { key: string; value: string }[] = [];
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(resolve(file), 'utf8');
    } catch (err) {
      throw new UsageError(
        `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
    items.push(...parseEnvFile(text, file));
  } else {
    for (const [i, pair] of pairs.entries()) {
      const eq = pair.indexOf('=');
      // Never quoted back: a mistyped argument may be a value.
      if (eq < 1) throw new UsageError(`argument ${i + 2} of secrets set is not KEY=VALUE`);
      items.push({ key: pair.slice(0, eq), value: pair.slice(eq + 1) });
    }
  }
  if (items.length === 0) throw new UsageError('secrets set needs KEY=VALUE… or --from-env-file FILE');
  return items;
}
