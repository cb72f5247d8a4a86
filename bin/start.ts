/**
 * `npm start`: the whole service on http://127.0.0.1:$PORT with embedded dynalite, in-process state
 * machines and local adapters. Env: PORT (3000), PREVIEW_DATA_DIR (./.preview-data), PREVIEW_GIT_ROOT,
 * PREVIEW_ISOLATION (auto | bwrap | none).
 */
import { describeIsolation } from '../lib/local/adapters.js';
import { type LocalService, startLocal, webhookStartupLines } from '../lib/local/server.js';
import { describeTestRunTools } from '../lib/local/test-runs.js';

let service: LocalService;
try {
  service = await startLocal({
    port: process.env.PORT ? Number(process.env.PORT) : 3000,
    dataDir: process.env.PREVIEW_DATA_DIR ?? '.preview-data',
    gitRoot: process.env.PREVIEW_GIT_ROOT,
  });
} catch (err) {
  // A refused start (isolation required but unusable, a data or work dir that is not private) says why.
  process.stderr.write(`preview control plane did not start: ${(err as Error).message}\n`);
  process.exit(1);
}

// Signal handlers first: whoever waits for the banner below may stop the server the moment it appears.
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`${signal}: stopping\n`);
    service.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}

process.stderr.write(
  `preview control plane listening on ${service.url}\n` +
    `  data:        ${service.dataDir}\n` +
    `  credentials: ${service.credentialsPath} (orgId ${service.credentials.orgId})\n` +
    `  health:      ${service.url}/healthz\n` +
    `  ${describeIsolation(service.runtime.isolation)}\n` +
    `  ${describeTestRunTools()}\n` +
    `${webhookStartupLines(service).join('\n')}\n`,
);
