/**
 * `npm start`: the whole service on http://127.0.0.1:$PORT with embedded dynalite, in-process state
 * machines and local adapters. Env: PORT (3000), PREVIEW_DATA_DIR (./.preview-data), PREVIEW_GIT_ROOT,
 * PREVIEW_ISOLATION (auto | bwrap | none).
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { describeFairShare } from '../functions/core/applications/index.js';
import { batchedSink, setLogSink } from '../functions/shared/log.js';
import { describeIsolation, describeServices } from '../lib/local/adapters.js';
import { DataDirInUseError, type DataDirLock } from '../lib/local/data-dir-lock.js';
import {
  type LocalService,
  nextStepLines,
  startLocal,
  takeDataDir,
  webhookStartupLines,
} from '../lib/local/server.js';
import { describeTestRunTools } from '../lib/local/test-runs.js';

const port = process.env.PORT ? Number(process.env.PORT) : 3000;
const portInUse = (p: number) =>
  `port ${p} is in use; set PORT=… to another port (PORT=${p === 3000 ? 3001 : 3000} npm start), or stop what holds it\n`;

const dataDir = resolve(process.env.PREVIEW_DATA_DIR ?? '.preview-data');

// Before anything else: one server per data dir (a second one would replace the first's database socket
// and stop its apps while recovering), then the port.
// A data dir that does not exist yet is created only once the port is known free.
let lock: DataDirLock | undefined = existsSync(dataDir) ? lockOrExit() : undefined;
if (port !== 0 && (await inUse(port))) {
  lock?.release();
  process.stderr.write(portInUse(port));
  process.exit(1);
}
lock ??= lockOrExit();

// Log lines of one event-loop turn in one write (functions/shared/log.ts).
setLogSink(batchedSink((text) => process.stdout.write(text)));

let service: LocalService;
try {
  service = await startLocal({ port, dataDir, gitRoot: process.env.PREVIEW_GIT_ROOT, lock });
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
    `  ${describeFairShare()}\n` +
    `  ${describeServices()}\n` +
    `${webhookStartupLines(service).join('\n')}\n` +
    `${nextStepLines(service).join('\n')}\n`,
);

/** The data dir's lock, or exit 1 saying who holds it. */
function lockOrExit(): DataDirLock {
  try {
    return takeDataDir(dataDir);
  } catch (err) {
    process.stderr.write(
      err instanceof DataDirInUseError
        ? `${err.message}; stop it first, or set PREVIEW_DATA_DIR to another directory\n`
        : `preview control plane did not start: ${(err as Error).message}\n`,
    );
    process.exit(1);
  }
}

/** Whether something listens on 127.0.0.1:`p` already (a listen there fails with EADDRINUSE). */
function inUse(p: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE'));
    probe.listen(p, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}
