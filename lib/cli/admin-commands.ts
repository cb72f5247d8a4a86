import '../../functions/shared/polyfills.js';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  type ApplicationSettings,
  createApplication,
  createOrganization,
  ensureAccessKey,
  getApplication,
  MAX_TTL_HOURS,
  organizationExists,
  parseAccessMode,
  parseAllowedOrigins,
  parsePreviewRuleSettings,
  parseSleepMinutes,
  previewRulesOf,
  rotateAccessKey,
  updateApplication,
} from '../../functions/core/applications/index.js';
import { type HealPlan, keepHeals, planKeptHeals } from '../../functions/core/runs/index.js';
import { ensureFactorySecret, rotateFactorySecret } from '../../functions/core/scenarios/index.js';
import { importTests } from '../../functions/core/test-definitions/index.js';
import { eventBus, secretStore } from '../../functions/ports/registry.js';
import { config } from '../../functions/shared/config.js';
import { AlreadyExistsError, ValidationError } from '../../functions/shared/errors.js';
import { setLogSink } from '../../functions/shared/log.js';
import { APP_NAME_RE, repoFullName } from '../../functions/shared/validation.js';
import { EventFileError, parseEventFile, queueLocalEvents } from '../local/bus.js';
import { acquireDataDirLock, DataDirInUseError, liveOwner } from '../local/data-dir-lock.js';
import { bootLocalRuntime, serverInfoPath } from '../local/server.js';
import { localCredentials } from './api.js';
import { type Parsed, UsageError } from './args.js';

/*
 * previewctl's admin commands: organizations, applications, tests import, events put. They act on the
 * tables (and the event bus) with the service's own code, where the API has no route for them. The rest
 * of previewctl (main.ts and the API commands) goes through the HTTP API and never loads this file.
 */

/**
 * Reach the data: the running local server's database (through its socket: the server keeps the data
 * dir), or, when no server runs, our own dynalite on the data dir under its lock (a server started
 * meanwhile is refused until we are done), or AWS.
 */
async function connect(): Promise<() => Promise<void>> {
  if (process.env.PREVIEW_MODE === 'aws') {
    config();
    return async () => undefined;
  }
  const dataDir = localDataDir();
  const owner = liveOwner(dataDir);
  if (owner?.by === 'npm start') {
    const info = readServerInfo(dataDir);
    if (!info || info.pid !== owner.pid)
      throw new Error(
        `${new DataDirInUseError(dataDir, owner).message}, still starting: try again in a moment`,
      );
    const { adapters } = await bootLocalRuntime({
      dataDir,
      gitRoot: process.env.PREVIEW_GIT_ROOT,
      dynamodbEndpoint: info.dynamodbEndpoint,
    });
    return () => adapters.stop();
  }
  const lock = acquireDataDirLock(dataDir, 'previewctl');
  try {
    const { dynamo, adapters } = await bootLocalRuntime({ dataDir, gitRoot: process.env.PREVIEW_GIT_ROOT });
    return async () => {
      await adapters.stop();
      await dynamo.stop();
      lock.release();
    };
  } catch (err) {
    lock.release();
    throw err;
  }
}

/** The data dir, which must exist (run from another directory, the default points nowhere useful). */
function localDataDir(): string {
  const dataDir = resolve(process.env.PREVIEW_DATA_DIR ?? '.preview-data');
  if (!existsSync(dataDir))
    throw new Error(
      `no data dir at ${dataDir} (PREVIEW_DATA_DIR, default ./.preview-data of the current directory): ` +
        'run previewctl where `npm start` runs, or set PREVIEW_DATA_DIR to its data dir',
    );
  return dataDir;
}

function readServerInfo(dataDir: string): { pid: number; dynamodbEndpoint: string } | undefined {
  try {
    return JSON.parse(readFileSync(serverInfoPath(dataDir), 'utf8'));
  } catch {
    return undefined;
  }
}

/** `--org`, else PREVIEW_ORG, else (locally) the data dir's only organization; checked to exist. */
async function requireOrg(given: string | undefined): Promise<string> {
  let orgId = given ?? process.env.PREVIEW_ORG;
  if (!orgId && process.env.PREVIEW_MODE !== 'aws') orgId = localCredentials(localDataDir(), undefined).orgId;
  if (!orgId) throw new UsageError('--org is required (or PREVIEW_ORG)');
  if (!(await organizationExists(orgId))) throw new UsageError(`organization ${orgId} not found`);
  return orgId;
}

/** A value option's value (the command table says which options take one). */
const text = (p: Parsed, name: string) => p.values[name] as string | undefined;
/** Whether a flag is given. */
const flag = (p: Parsed, name: string) => p.values[name] === true;

async function run(p: Parsed): Promise<Record<string, unknown>> {
  const command = p.command.name;
  if (p.command.via !== 'admin') throw new UsageError(`unknown command "${command}" (previewctl --help)`);
  const repo = text(p, 'repo');
  if (repo !== undefined && !repoFullName.safeParse(repo).success) {
    throw new UsageError('--repo must be owner/repo');
  }
  const file = p.positionals[0];
  if (command === 'tests import' && !file) throw new UsageError('tests import needs a FILE');
  if (command === 'events put') return putEvents(text(p, 'file'));
  const settings = command === 'apps update' ? appSettings(p.values as AppUpdateValues) : undefined;
  const close = await connect();
  try {
    switch (command) {
      case 'orgs create': {
        const name = text(p, 'name');
        if (!name) throw new UsageError('--name is required');
        const org = await createOrganization(name);
        if (process.env.PREVIEW_MODE !== 'aws') keepLocalCredentials(org);
        return { ...org };
      }
      case 'apps create': {
        const orgId = await requireOrg(p.org);
        const app = await createApplication({
          orgId,
          name: text(p, 'name'),
          repoFullName: repo,
          disabled: flag(p, 'disabled'),
          installationActive: !flag(p, 'no-installation'),
        });
        // Its Environment Factory signing secret, mounted into the factory app on deploy.
        await ensureFactorySecret(secretStore(), app.applicationId);
        // Its access key, which signs the links into its protected previews.
        await ensureAccessKey(secretStore(), app.applicationId);
        return { applicationId: app.applicationId };
      }
      case 'apps update': {
        const orgId = await requireOrg(p.org);
        const appId = text(p, 'app');
        if (!appId) throw new UsageError('--app is required');
        const app = await updateApplication(orgId, appId, settings!);
        if (settings?.factoryApp) await ensureFactorySecret(secretStore(), app.applicationId);
        if (settings?.access) await ensureAccessKey(secretStore(), app.applicationId);
        return {
          applicationId: app.applicationId,
          repoFullName: app.repoFullName ?? null,
          ttlHours: app.ttlHours ?? 72,
          deployDrafts: app.deployDrafts ?? false,
          disabled: app.disabled,
          factoryApp: app.factoryApp ?? null,
          factoryPath: app.factoryPath ?? null,
          allowedOrigins: app.allowedOrigins ?? [],
          ...(app.access ? { access: app.access } : {}),
          ...(app.sleepAfterMinutes !== undefined ? { sleepAfterMinutes: app.sleepAfterMinutes } : {}),
          ...previewRulesOf(app),
        };
      }
      case 'apps rotate-access-key':
      case 'apps rotate-factory-secret': {
        const orgId = await requireOrg(p.org);
        const appId = text(p, 'app');
        if (!appId) throw new UsageError('--app is required');
        const app = await getApplication(orgId, appId);
        // The new key or secret is never printed: links come from the environment's status (envs open).
        const rotate = command === 'apps rotate-access-key' ? rotateAccessKey : rotateFactorySecret;
        await rotate(secretStore(), app.applicationId);
        return { applicationId: app.applicationId, rotated: true };
      }
      case 'tests heal': {
        const orgId = await requireOrg(p.org);
        const runId = text(p, 'run');
        if (!runId) throw new UsageError('--run is required');
        const plan = flag(p, 'write') ? await keepHeals(orgId, runId) : await planKeptHeals(orgId, runId);
        return { ...plan };
      }
      default: {
        const orgId = await requireOrg(p.org);
        let doc: unknown;
        try {
          doc = JSON.parse(readFileSync(resolve(process.cwd(), file!), 'utf8'));
        } catch (err) {
          throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
        }
        return { ...(await importTests(orgId, doc, { applicationId: text(p, 'app') })) };
      }
    }
  } finally {
    await close();
  }
}

/**
 * Locally, an organization's credentials are kept in `<data dir>/orgs/ORG.json` (0600, in the private
 * data dir), where previewctl's API commands find them (`--org ORG`).
 */
function keepLocalCredentials(org: { orgId: string }): void {
  const dir = join(localDataDir(), 'orgs');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, `${org.orgId}.json`), `${JSON.stringify(org, null, 2)}\n`, { mode: 0o600 });
}

/** The options of `apps update` (the command table's), as the parser gives them. */
interface AppUpdateValues {
  'ttl-hours'?: string;
  'deploy-drafts'?: boolean;
  'no-deploy-drafts'?: boolean;
  'factory-app'?: string;
  'factory-path'?: string;
  'allowed-origins'?: string;
  access?: string;
  'sleep-after-minutes'?: string;
  'skip-label'?: string;
  'require-label'?: string;
  paths?: string;
  'skip-authors'?: string;
}

/** The settings `apps update` changes, from its options. */
function appSettings(values: AppUpdateValues): ApplicationSettings {
  const out: ApplicationSettings = previewRuleOptions(values);
  try {
    if (values.access !== undefined) out.access = parseAccessMode(values.access);
    const sleep = values['sleep-after-minutes'];
    if (sleep !== undefined) out.sleepAfterMinutes = parseSleepMinutes(sleep);
  } catch (err) {
    if (err instanceof ValidationError)
      throw new UsageError(`--${err.message.replace(/^sleepAfterMinutes/, 'sleep-after-minutes')}`);
    throw err;
  }
  const origins = values['allowed-origins'];
  if (origins !== undefined) {
    try {
      out.allowedOrigins = parseAllowedOrigins(origins.split(','));
    } catch (err) {
      if (err instanceof ValidationError)
        throw new UsageError(`--allowed-origins: ${err.message.replace(/^allowedOrigins: /, '')}`);
      throw err;
    }
  }
  const factoryApp = values['factory-app'];
  const factoryPath = values['factory-path'];
  if (factoryApp !== undefined) {
    if (!APP_NAME_RE.test(factoryApp))
      throw new UsageError('--factory-app must be an app name of preview.yaml');
    out.factoryApp = factoryApp;
    out.factoryPath = factoryPath ?? '/';
  }
  if (factoryPath !== undefined) {
    if (!factoryPath.startsWith('/')) throw new UsageError('--factory-path must be a path starting with /');
    if (factoryApp === undefined) throw new UsageError('--factory-path needs --factory-app');
  }
  const ttl = values['ttl-hours'];
  if (ttl !== undefined) {
    const n = Number(ttl);
    if (!/^\d+(\.\d+)?$/.test(ttl.trim()) || !Number.isFinite(n) || n > MAX_TTL_HOURS)
      throw new UsageError(`--ttl-hours must be a number of hours from 0 (never) to ${MAX_TTL_HOURS}`);
    out.ttlHours = n;
  }
  if (values['deploy-drafts'] && values['no-deploy-drafts'])
    throw new UsageError('--deploy-drafts and --no-deploy-drafts exclude each other');
  if (values['deploy-drafts']) out.deployDrafts = true;
  if (values['no-deploy-drafts']) out.deployDrafts = false;
  if (Object.keys(out).length === 0)
    throw new UsageError(
      'apps update needs --ttl-hours N, --deploy-drafts, --no-deploy-drafts, --factory-app APP, ' +
        '--allowed-origins ORIGINS, --access protected|public, --sleep-after-minutes N, --skip-label L, ' +
        '--require-label L, --paths GLOBS or --skip-authors LOGINS',
    );
  return out;
}

/** The preview rules `apps update` changes (core/preview-rules.ts): lists comma-separated, "" empties. */
function previewRuleOptions(values: {
  'skip-label'?: string;
  'require-label'?: string;
  paths?: string;
  'skip-authors'?: string;
}): ApplicationSettings {
  const list = (v: string | undefined) => (v === undefined ? undefined : v.split(','));
  const given = {
    skipLabel: values['skip-label'],
    requireLabel: values['require-label'],
    paths: list(values.paths),
    skipAuthors: list(values['skip-authors']),
  };
  try {
    return parsePreviewRuleSettings(given);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    const flag = { skipLabel: 'skip-label', requireLabel: 'require-label', skipAuthors: 'skip-authors' };
    throw new UsageError(
      `--${err.message.replace(/^(\w+): /, (_m, f: string) => `${flag[f as keyof typeof flag] ?? f}: `)}`,
    );
  }
}

/** `events put`: the running local server's bus (its inbox), or EventBridge in AWS mode. */
async function putEvents(file: string | undefined): Promise<Record<string, unknown>> {
  if (!file) throw new UsageError('events put needs --file EVENT.json');
  let events: ReturnType<typeof parseEventFile>;
  try {
    events = parseEventFile(readFileSync(resolve(process.cwd(), file), 'utf8'));
  } catch (err) {
    if (err instanceof EventFileError) throw new UsageError(`${file}: ${err.message}`);
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  if (process.env.PREVIEW_MODE === 'aws') {
    const { eventIds } = await eventBus().put(events);
    return { put: events.length, eventIds };
  }
  const dataDir = resolve(process.env.PREVIEW_DATA_DIR ?? '.preview-data');
  if (!existsSync(dataDir))
    throw new UsageError(`no data dir at ${dataDir}: start the local server once (npm start)`);
  const { file: queued } = queueLocalEvents(dataDir, events);
  const running = liveOwner(dataDir)?.by === 'npm start';
  return {
    put: events.length,
    queued,
    delivery: running
      ? 'the running local server delivers them now'
      : 'at the next start of the local server',
  };
}

/**
 * Run an admin command, parsed by main.ts with the one parser of the command table; returns the exit
 * code. Output is one JSON object on stdout with `--json`.
 */
export async function main(command: Parsed): Promise<number> {
  const json = command.json;
  setLogSink(() => undefined);
  try {
    const result = await run(command);
    const human =
      command.command.name === 'tests heal' ? healDiff(result as unknown as HealPlan) : formatHuman(result);
    process.stdout.write(json ? `${JSON.stringify(result)}\n` : `${human}\n`);
    return 0;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // A second application for a repository: the existing one's id, to act on instead.
    const existing = err instanceof AlreadyExistsError ? { applicationId: err.existingId } : {};
    if (json) process.stdout.write(`${JSON.stringify({ error: message.split('\n')[0], ...existing })}\n`);
    else process.stderr.write(`previewctl: ${message}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

/** `tests heal`'s diff: each changed step's selector and outer HTML, old (`-`) then new (`+`). */
function healDiff(plan: HealPlan): string {
  const lines = [`test ${JSON.stringify(plan.testName)} (${plan.testId}), run ${plan.runId}:`];
  for (const c of plan.changes) {
    lines.push(`step ${c.step} (${c.interaction}), healed at ${c.score}:`);
    lines.push(`- selector: ${c.from.selector}`, `+ selector: ${c.to.selector}`);
    if (c.from.html !== c.to.html) lines.push(`- html: ${c.from.html}`, `+ html: ${c.to.html}`);
  }
  for (const s of plan.skipped) lines.push(`step ${s.step}: not kept: ${s.reason}`);
  if (!plan.changes.length) lines.push('nothing to write: no healed step to keep');
  else if (plan.written) lines.push(`written: ${plan.changes.length} step(s); the next run needs no healing`);
  else lines.push('not written: run again with --write to keep these');
  return lines.join('\n');
}

function formatHuman(result: Record<string, unknown>): string {
  return Object.entries(result)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join('\n');
}
