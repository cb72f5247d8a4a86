import '../../functions/shared/polyfills.js';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureFactorySecret, rotateFactorySecret } from '../../functions/core/scenarios.js';
import {
  type ApplicationSettings,
  createApplication,
  createOrganization,
  getApplication,
  MAX_TTL_HOURS,
  organizationExists,
  parseAllowedOrigins,
  updateApplication,
} from '../../functions/core/tenancy.js';
import { importTests } from '../../functions/core/tests.js';
import { eventBus, secretStore } from '../../functions/ports/registry.js';
import { config } from '../../functions/shared/config.js';
import { AlreadyExistsError, ValidationError } from '../../functions/shared/errors.js';
import { setLogSink } from '../../functions/shared/log.js';
import { APP_NAME_RE, repoFullName } from '../../functions/shared/validation.js';
import { EventFileError, parseEventFile, queueLocalEvents } from './bus.js';
import { helpFor, isOpsCommand, OPS_USAGE, runOps, UsageError } from './cli-ops.js';
import { bootLocalRuntime, serverInfoPath } from './server.js';

const USAGE = `usage: previewctl <command> [options] [--json]

  orgs create --name NAME
      create an organization → {"orgId","apiKey","clientId","clientSecret"} (shown once)
  apps create --org ORG [--repo owner/repo] [--name NAME] [--disabled] [--no-installation]
      create an application; without --repo it is unlinked → {"applicationId"}
  apps update --org ORG --app ID [--ttl-hours N] [--deploy-drafts | --no-deploy-drafts]
      change an application's settings: hours without a deploy before a PR preview is torn down
      (default 72, 0 = never), whether draft pull requests deploy → the application's settings
      [--factory-app APP --factory-path /PATH]: the Environment Factory of scenario runs (preview.yaml
      \`factory\` wins when both are set)
      [--allowed-origins "https://login.example.com,https://cdn.example.com"]: origins a test run's
      browser may load besides the preview's own app URLs (replaces the list; "" empties it)
  apps rotate-factory-secret --org ORG --app ID
      replace the application's factory signing secret (PREVIEW_FACTORY_SECRET; apps get the new one on
      their next deploy) → {"applicationId","rotated":true}
  tests import --org ORG [--app ID] FILE
      import a JSON array of tests → {"tests":[{"id","name"}]}; --app sets every test's application
      (the one whose environments its runs target), whatever application_id the file gives
  events put --file EVENT.json
      put events on the service's event bus (locally: the running server's, through its inbox; with
      PREVIEW_MODE=aws: EventBridge, EVENT_BUS_NAME) → {"put": N, ...}. EVENT.json: an EventBridge
      event ({"source","detail-type","detail"}), a PutEvents entry, a list of them, or {"Entries":[...]}
${OPS_USAGE}
  help [COMMAND]
      this text, or a command's (as \`previewctl COMMAND --help\`)

Exit codes: 0 done, 1 failed (an \`envs wait\` or \`runs wait\` that ended failed, too), 2 usage errors.
Local mode (default) acts on PREVIEW_DATA_DIR (./.preview-data), through the running server's database
when \`npm start\` is up. With PREVIEW_MODE=aws it uses the deployed tables named by the TABLE_* variables.`;

/** Reach the data: the running local server's dynalite, our own on the data dir, or AWS. */
async function connect(): Promise<() => Promise<void>> {
  if (process.env.PREVIEW_MODE === 'aws') {
    config();
    return async () => undefined;
  }
  const dataDir = resolve(process.env.PREVIEW_DATA_DIR ?? '.preview-data');
  // Run from another directory, the default points nowhere useful: say where it looked, create nothing.
  if (!existsSync(dataDir))
    throw new Error(
      `no data dir at ${dataDir} (PREVIEW_DATA_DIR, default ./.preview-data of the current directory): ` +
        'run previewctl where `npm start` runs, or set PREVIEW_DATA_DIR to its data dir',
    );
  const infoPath = serverInfoPath(dataDir);
  if (existsSync(infoPath)) {
    const info = JSON.parse(readFileSync(infoPath, 'utf8')) as { pid: number; dynamodbEndpoint: string };
    let alive = true;
    try {
      process.kill(info.pid, 0);
    } catch {
      alive = false;
    }
    if (alive) {
      const { adapters } = await bootLocalRuntime({
        dataDir,
        gitRoot: process.env.PREVIEW_GIT_ROOT,
        dynamodbEndpoint: info.dynamodbEndpoint,
      });
      return () => adapters.stop();
    }
  }
  const { dynamo, adapters } = await bootLocalRuntime({ dataDir, gitRoot: process.env.PREVIEW_GIT_ROOT });
  return async () => {
    await adapters.stop();
    await dynamo.stop();
  };
}

async function requireOrg(orgId: string | undefined): Promise<string> {
  if (!orgId) throw new UsageError('--org is required');
  if (!(await organizationExists(orgId))) throw new UsageError(`organization ${orgId} not found`);
  return orgId;
}

async function run(args: string[]): Promise<Record<string, unknown>> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      org: { type: 'string' },
      repo: { type: 'string' },
      disabled: { type: 'boolean', default: false },
      'no-installation': { type: 'boolean', default: false },
      app: { type: 'string' },
      file: { type: 'string' },
      'ttl-hours': { type: 'string' },
      'deploy-drafts': { type: 'boolean' },
      'no-deploy-drafts': { type: 'boolean' },
      'factory-app': { type: 'string' },
      'factory-path': { type: 'string' },
      'allowed-origins': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [noun, verb, ...rest] = positionals;
  const command = `${noun ?? ''} ${verb ?? ''}`.trim();
  if (values.help || !noun) throw new UsageError(USAGE);
  if (
    ![
      'orgs create',
      'apps create',
      'apps update',
      'apps rotate-factory-secret',
      'tests import',
      'events put',
    ].includes(command)
  ) {
    throw new UsageError(`unknown command "${command}"\n\n${USAGE}`);
  }
  if (values.repo !== undefined && !repoFullName.safeParse(values.repo).success) {
    throw new UsageError('--repo must be owner/repo');
  }
  const file = rest[0];
  if (command === 'tests import' && !file) throw new UsageError('tests import needs a FILE');
  if (command === 'events put') return putEvents(values.file);
  const settings = command === 'apps update' ? appSettings(values) : undefined;
  const close = await connect();
  try {
    switch (command) {
      case 'orgs create': {
        if (!values.name) throw new UsageError('--name is required');
        return { ...(await createOrganization(values.name)) };
      }
      case 'apps create': {
        const orgId = await requireOrg(values.org);
        const app = await createApplication({
          orgId,
          name: values.name,
          repoFullName: values.repo,
          disabled: values.disabled,
          installationActive: !values['no-installation'],
        });
        // Its Environment Factory signing secret (issue 12), mounted into the factory app on deploy.
        await ensureFactorySecret(secretStore(), app.applicationId);
        return { applicationId: app.applicationId };
      }
      case 'apps update': {
        const orgId = await requireOrg(values.org);
        if (!values.app) throw new UsageError('--app is required');
        const app = await updateApplication(orgId, values.app, settings!);
        if (settings?.factoryApp) await ensureFactorySecret(secretStore(), app.applicationId);
        return {
          applicationId: app.applicationId,
          repoFullName: app.repoFullName ?? null,
          ttlHours: app.ttlHours ?? 72,
          deployDrafts: app.deployDrafts ?? false,
          disabled: app.disabled,
          factoryApp: app.factoryApp ?? null,
          factoryPath: app.factoryPath ?? null,
          allowedOrigins: app.allowedOrigins ?? [],
        };
      }
      case 'apps rotate-factory-secret': {
        const orgId = await requireOrg(values.org);
        if (!values.app) throw new UsageError('--app is required');
        const app = await getApplication(orgId, values.app);
        await rotateFactorySecret(secretStore(), app.applicationId);
        return { applicationId: app.applicationId, rotated: true };
      }
      default: {
        const orgId = await requireOrg(values.org);
        let doc: unknown;
        try {
          doc = JSON.parse(readFileSync(resolve(process.cwd(), file!), 'utf8'));
        } catch (err) {
          throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
        }
        return { ...(await importTests(orgId, doc, { applicationId: values.app })) };
      }
    }
  } finally {
    await close();
  }
}

/** The settings `apps update` changes, from its options. */
function appSettings(values: {
  'ttl-hours'?: string;
  'deploy-drafts'?: boolean;
  'no-deploy-drafts'?: boolean;
  'factory-app'?: string;
  'factory-path'?: string;
  'allowed-origins'?: string;
}): ApplicationSettings {
  const out: ApplicationSettings = {};
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
      'apps update needs --ttl-hours N, --deploy-drafts, --no-deploy-drafts, --factory-app APP or ' +
        '--allowed-origins ORIGINS',
    );
  return out;
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
  let running = false;
  try {
    const info = JSON.parse(readFileSync(serverInfoPath(dataDir), 'utf8')) as { pid: number };
    process.kill(info.pid, 0);
    running = true;
  } catch {
    running = false;
  }
  return {
    put: events.length,
    queued,
    delivery: running
      ? 'the running local server delivers them now'
      : 'at the next start of the local server',
  };
}

/** Run the CLI; returns the exit code. Output is one JSON object on stdout with `--json`. */
export async function main(args: string[]): Promise<number> {
  const json = args.includes('--json');
  const help = helpFor(args, USAGE);
  if (help !== undefined) {
    process.stdout.write(`${help}\n`);
    return 0;
  }
  setLogSink(() => undefined);
  try {
    const { result, code, text } = isOpsCommand(args)
      ? await runOps(args, { connect, requireOrg, progress: (line) => process.stderr.write(`${line}\n`) })
      : { result: await run(args), code: 0, text: undefined };
    // A log (`envs logs`) is printed as it is.
    if (text !== undefined && !json) process.stdout.write(text);
    else process.stdout.write(json ? `${JSON.stringify(result)}\n` : `${formatHuman(result)}\n`);
    return code;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // A second application for a repository: the existing one's id, to act on instead.
    const existing = err instanceof AlreadyExistsError ? { applicationId: err.existingId } : {};
    if (json) process.stdout.write(`${JSON.stringify({ error: message.split('\n')[0], ...existing })}\n`);
    else process.stderr.write(`previewctl: ${message}\n`);
    // parseArgs refusing an option or a value is a usage error too.
    const badArgs = String((err as NodeJS.ErrnoException).code ?? '').startsWith('ERR_PARSE_ARGS');
    return err instanceof UsageError || badArgs ? 2 : 1;
  }
}

function formatHuman(result: Record<string, unknown>): string {
  return Object.entries(result)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join('\n');
}
