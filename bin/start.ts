/**
 * `npm start`: the whole service on http://127.0.0.1:$PORT with embedded dynalite, in-process state
 * machines and local adapters. Env: PORT (3000), PREVIEW_DATA_DIR (./.preview-data), PREVIEW_GIT_ROOT,
 * PREVIEW_ISOLATION (auto | bwrap | none).
 */
import { createServer } from 'node:net';
import { batchedSink, setLogSink } from '../functions/shared/log.js';
import { describeIsolation } from '../lib/local/adapters.js';
import { type LocalService, startLocal, webhookStartupLines } from '../lib/local/server.js';
import { describeTestRunTools } from '../lib/local/test-runs.js';

const port = process.env.PORT ? Number(process.env.PORT) : 3000;
const portInUse = (p: number) =>
  `port ${p} is in use; set PORT=… to another port (PORT=${p === 3000 ? 3001 : 3000} npm start), or stop what holds it\n`;

// Before anything else (recovery of the data dir would stop the apps of a server already running there).
if (port !== 0 && (await inUse(port))) {
  process.stderr.write(portInUse(port));
  process.exit(1);
}

// Log lines of one event-loop turn in one write (functions/shared/log.ts).
setLogSink(batchedSink((text) => process.stdout.write(text)));

let service: LocalService;
try {
  service = await startLocal({
    port,
    dataDir: process.env.PREVIEW_DATA_DIR ?? '.preview-data',
    gitRoot: process.env.PREVIEW_GIT_ROOT,
  });
} catch (err) {
  if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
    process.stderr.write(portInUse(port));
    process.exit(1);
  }
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
    `  ${describeIsolation(service.runtime.isolation, service.runtime.limits, service.runtime.network)}\n` +
    `  ${describeTestRunTools()}\n` +
    `${webhookStartupLines(service).join('\n')}\n`,
);

/** Whether something listens on 127.0.0.1:`p` already (a listen there fails with EADDRINUSE). */
function inUse(p: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE'));
    probe.listen(p, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}
