/**
 * `npm start`: the whole service on http://127.0.0.1:$PORT with embedded dynalite, in-process state
 * machines and local adapters. Env: PORT (3000), PREVIEW_DATA_DIR (./.preview-data), PREVIEW_GIT_ROOT.
 */
import { startLocal } from '../lib/local/server.js';

const service = await startLocal({
  port: process.env.PORT ? Number(process.env.PORT) : 3000,
  dataDir: process.env.PREVIEW_DATA_DIR ?? '.preview-data',
  gitRoot: process.env.PREVIEW_GIT_ROOT,
});
process.stderr.write(
  `preview control plane listening on ${service.url}\n` +
    `  data:        ${service.dataDir}\n` +
    `  credentials: ${service.credentialsPath} (orgId ${service.credentials.orgId})\n` +
    `  health:      ${service.url}/healthz\n`,
);

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
