/**
 * A second writer of secret bundles in its own process, as another Lambda container would be: it joins a
 * running local server's dynalite (server.json, as previewctl does) and its secret files, and upserts keys
 * through the same use case the PUT route calls. Used by test/integration/secrets/concurrency.test.ts.
 *
 *   node --import tsx test/support/secret-writer.ts <dataDir> <orgId> <applicationId> <app> <prefix> <count>
 *
 * Once booted it prints `ready` and waits for a line on stdin (so the caller can start its own writes at
 * the same moment), then upserts `<prefix><i>` = `value of <prefix><i>` for i < count, all at once, and
 * prints one JSON line: `{"saved": n, "failed": ["<error name>: <message>", …]}`.
 */
import { readFileSync } from 'node:fs';
import { upsertSecrets } from '../../functions/core/secrets/bundles.js';
import { secretStore } from '../../functions/ports/registry.js';
import { setLogSink } from '../../functions/shared/log.js';
import { bootLocalRuntime, serverInfoPath } from '../../lib/local/server.js';

const [dataDir, orgId, applicationId, app, prefix, count] = process.argv.slice(2);
if (!dataDir || !orgId || !applicationId || !app || !prefix || !count) {
  process.stderr.write('usage: secret-writer.ts <dataDir> <orgId> <applicationId> <app> <prefix> <count>\n');
  process.exit(2);
}
setLogSink(() => {});
const info = JSON.parse(readFileSync(serverInfoPath(dataDir), 'utf8')) as { dynamodbEndpoint: string };
const { adapters } = await bootLocalRuntime({ dataDir, dynamodbEndpoint: info.dynamodbEndpoint });
process.stdout.write('ready\n');
await new Promise((resolve) => process.stdin.once('data', resolve));
process.stdin.pause();
const results = await Promise.allSettled(
  Array.from({ length: Number(count) }, (_, i) =>
    upsertSecrets(secretStore(), orgId, { applicationId, app }, [
      { key: `${prefix}${i}`, value: `value of ${prefix}${i}` },
    ]),
  ),
);
const failed = results.flatMap((r) =>
  r.status === 'rejected' ? [`${(r.reason as Error).name}: ${(r.reason as Error).message}`] : [],
);
process.stdout.write(`${JSON.stringify({ saved: results.length - failed.length, failed })}\n`);
await adapters.stop();
process.exit(0);
