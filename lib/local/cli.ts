import '../../functions/shared/polyfills.js';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  createApplication,
  createOrganization,
  MAX_TTL_HOURS,
  organizationExists,
  updateApplication,
} from '../../functions/core/tenancy.js';
import { importTests } from '../../functions/core/tests.js';
import { eventBus } from '../../functions/ports/registry.js';
import { config } from '../../functions/shared/config.js';
import { setLogSink } from '../../functions/shared/log.js';
import { repoFullName } from '../../functions/shared/validation.js';
import { EventFileError, parseEventFile, queueLocalEvents } from './bus.js';
import { bootLocalRuntime, serverInfoPath } from './server.js';

const USAGE = `usage: previewctl <command> [options] [--json]

  orgs create --name NAME
      create an organization → {"orgId","apiKey","clientId","clientSecret"} (shown once)
  apps create --org ORG [--repo owner/repo] [--name NAME] [--disabled] [--no-installation]
      create an application; without --repo it is unlinked → {"applicationId"}
  apps update --org ORG --app ID [--ttl-hours N] [--deploy-drafts | --no-deploy-drafts]
      change an application's settings: hours without a deploy before a PR preview is torn down
      (default 72, 0 = never), whether draft pull requests deploy → the application's settings
  tests import --org ORG [--app ID] FILE
      import a JSON array of tests → {"tests":[{"id","name"}]}; --app sets every test's application
      (the one whose environments its runs target), whatever application_id the file gives
  events put --file EVENT.json
      put events on the service's event bus (locally: the running server's, through its inbox; with
      PREVIEW_MODE=aws: EventBridge, EVENT_BUS_NAME) → {"put": N, ...}. EVENT.json: an EventBridge
      event ({"source","detail-type","detail"}), a PutEvents entry, a list of them, or {"Entries":[...]}

Local mode (default) acts on PREVIEW_DATA_DIR (./.preview-data), through the running server's database
when \`npm start\` is up. With PREVIEW_MODE=aws it uses the deployed tables named by the TABLE_* variables.`;

class UsageError extends Error {}

/** Reach the data: the running local server's dynalite, our own on the data dir, or AWS. */
async function connect(): Promise<() => Promise<void>> {
  if (process.env.PREVIEW_MODE === 'aws') {
    config();
    return async () => undefined;
  }
  const dataDir = resolve(process.env.PREVIEW_DATA_DIR ?? '.preview-data');
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
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [noun, verb, ...rest] = positionals;
  const command = `${noun ?? ''} ${verb ?? ''}`.trim();
  if (values.help || !noun) throw new UsageError(USAGE);
  if (!['orgs create', 'apps create', 'apps update', 'tests import', 'events put'].includes(command)) {
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
        return { applicationId: app.applicationId };
      }
      case 'apps update': {
        const orgId = await requireOrg(values.org);
        if (!values.app) throw new UsageError('--app is required');
        const app = await updateApplication(orgId, values.app, settings!);
        return {
          applicationId: app.applicationId,
          repoFullName: app.repoFullName ?? null,
          ttlHours: app.ttlHours ?? 72,
          deployDrafts: app.deployDrafts ?? false,
          disabled: app.disabled,
        };
      }
      default: {
        const orgId = await requireOrg(values.org);
        let doc: unknown;
        try {
          doc = JSON.parse(readFileSync(join(process.cwd(), file!), 'utf8'));
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
}): { ttlHours?: number; deployDrafts?: boolean } {
  const out: { ttlHours?: number; deployDrafts?: boolean } = {};
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
    throw new UsageError('apps update needs --ttl-hours N, --deploy-drafts or --no-deploy-drafts');
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
  setLogSink(() => undefined);
  try {
    const result = await run(args);
    process.stdout.write(json ? `${JSON.stringify(result)}\n` : `${formatHuman(result)}\n`);
    return 0;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (json) process.stdout.write(`${JSON.stringify({ error: message.split('\n')[0] })}\n`);
    else process.stderr.write(`previewctl: ${message}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
}

function formatHuman(result: Record<string, unknown>): string {
  return Object.entries(result)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join('\n');
}
