import { createServer } from 'node:net';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { bearer, call, linkRepo } from '../../support/api.js';
import { pollUntil, SERVER_JS, settled } from '../../support/apps.js';
import { makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * PREVIEW_APP_PORTS confines local apps' ports to a range: an app gets a port of the
 * range, and a deploy that finds none free there fails saying so. Real HTTP to the local server.
 */

let port: number;
/** Filled in before the server starts: a two-port range found free. */
const env: Record<string, string> = {};

/** A port free now (the system's pick), for a one-port range. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port: p } = server.address() as { port: number };
      server.close(() => resolve(p));
    });
  });

/** Two free ports side by side: a PR preview's app and its front door (both confined to the range). */
async function twoFreePorts(): Promise<number> {
  for (;;) {
    const p = await freePort();
    const next = await new Promise<boolean>((resolve) => {
      const server = createServer()
        .once('error', () => resolve(false))
        .listen(p + 1, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (next && p < 65535) return p;
  }
}

beforeAll(async () => {
  port = await twoFreePorts();
  env.PREVIEW_APP_PORTS = `${port}-${port + 1}`;
}, 30_000);
const h = localServerForFile({ env });

async function deploy(repo: string) {
  const sha = makeRepo(h.gitRoot, repo, {
    'preview.yaml': 'apps:\n  web:\n    port: 3000\n    command: node server.js web\n    health: /healthz\n',
    'server.js': SERVER_JS,
    VERSION: 'v1',
  });
  await linkRepo(h.org, repo);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: repo, prNumber: 1, headSha: sha, headRef: 'feature' },
    headers: bearer(h.org),
  });
  expect(res.status).toBe(202);
  return pollUntil(h, h.org, `/v1/preview/environments/${repo}/1`, settled);
}

describe('PREVIEW_APP_PORTS', () => {
  test('an app listens on a port of the range; when the range is used up, a deploy fails naming it', async () => {
    const first = await deploy('acme/one');
    // A PR preview sleeps when idle, so its URL is its front door's: the app and the door
    // take the range's two ports.
    expect(first.status).toBe('ready');
    const urlPort = Number(new URL(String(first.urls.web)).port);
    expect([port, port + 1]).toContain(urlPort);
    const second = await deploy('acme/two');
    expect(second.status).toBe('failed');
    expect(second.error).toBe(
      `no free port in PREVIEW_APP_PORTS=${port}-${port + 1} (2 ports, all in use): widen the range or tear down environments`,
    );
  }, 60_000);
});
