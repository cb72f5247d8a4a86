import '../../functions/shared/polyfills.js';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createApplication, createOrganization, organizationExists } from '../../functions/core/tenancy.js';
import { importTests } from '../../functions/core/tests.js';
import { config } from '../../functions/shared/config.js';
import { setLogSink } from '../../functions/shared/log.js';
import { repoFullName } from '../../functions/shared/validation.js';
import { bootLocalRuntime, serverInfoPath } from './server.js';

const USAGE = `usage: previewctl <command> [options] [--json]

  orgs create --name NAME
      create an organization → {"orgId","apiKey","clientId","clientSecret"} (shown once)
  apps create --org ORG [--repo owner/repo] [--name NAME] [--disabled] [--no-installation]
      create an application; without --repo it is unlinked → {"applicationId"}
  tests import --org ORG FILE
      import a JSON array of tests → {"tests":[{"id","name"}]}

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
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  const [noun, verb, ...rest] = positionals;
  const command = `${noun ?? ''} ${verb ?? ''}`.trim();
  if (values.help || !noun) throw new UsageError(USAGE);
  if (!['orgs create', 'apps create', 'tests import'].includes(command)) {
    throw new UsageError(`unknown command "${command}"\n\n${USAGE}`);
  }
  if (values.repo !== undefined && !repoFullName.safeParse(values.repo).success) {
    throw new UsageError('--repo must be owner/repo');
  }
  const file = rest[0];
  if (command === 'tests import' && !file) throw new UsageError('tests import needs a FILE');
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
      default: {
        const orgId = await requireOrg(values.org);
        let doc: unknown;
        try {
          doc = JSON.parse(readFileSync(join(process.cwd(), file!), 'utf8'));
        } catch (err) {
          throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
        }
        return { ...(await importTests(orgId, doc)) };
      }
    }
  } finally {
    await close();
  }
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
