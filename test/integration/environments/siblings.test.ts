// biome-ignore-all lint/suspicious/noTemplateCurlyInString: preview.yaml's `${apps.<name>.url}` syntax, not JS templates
import { describe, expect, test } from '@jest/globals';
import { bearer, call, linkRepo } from '../../support/api.js';
import { pollUntil, settled } from '../../support/apps.js';
import { commitFiles, makeRepo } from '../../support/git.js';
import { localServerForFile } from '../../support/local-server.js';

/*
 * Apps that find each other: preview.yaml env values reference siblings (`${apps.api.internalUrl}`,
 * `${apps.api.url}`), resolved by the local runtime before it starts them. Real HTTP to the local server,
 * apps run as processes from a git repository on disk.
 */

/** `/` fetches `$PEER_URL/hello` and shows the answer; `/hello` answers `hello from <name>`. */
const PEER_JS = `
const http = require('node:http');
const name = process.argv[2];
http.createServer(async (req, res) => {
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  if (req.url === '/hello') { res.writeHead(200); return res.end('hello from ' + name); }
  let answer;
  try { answer = await (await fetch(process.env.PEER_URL + '/hello')).text(); }
  catch (err) { answer = 'error: ' + err.message; }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ app: name, peer: process.env.PEER_URL, peerPublic: process.env.PEER_PUBLIC ?? null, answer }));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

const YAML = `apps:
  web:
    port: 3000
    command: node peer.js web
    health: /healthz
    env:
      PEER_URL: \${apps.api.internalUrl}
      PEER_PUBLIC: "\${apps.api.url}"
  api:
    port: 8000
    command: node peer.js api
    health: /healthz
    env:
      PEER_URL: \${apps.web.internalUrl}
`;

const h = localServerForFile({ env: { PREVIEW_READY_TIMEOUT_SECONDS: '10' } });

async function deploy(repo: string, sha: string) {
  await linkRepo(h.org, repo);
  const res = await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: repo, prNumber: 1, headSha: sha, headRef: 'feature' },
    headers: bearer(h.org),
  });
  expect(res.status).toBe(202);
  return pollUntil(h, h.org, `/v1/preview/environments/${repo}/1`, settled, 60_000);
}

const get = async (url: string) => (await fetch(url, { signal: AbortSignal.timeout(5_000) })).json() as any;

describe('sibling references in preview.yaml env', () => {
  test('two apps call each other through ${apps.<name>.internalUrl}; a redeploy keeps the ports', async () => {
    const sha = makeRepo(h.gitRoot, 'acme/duo', { 'preview.yaml': YAML, 'peer.js': PEER_JS });
    const first = await deploy('acme/duo', sha);
    expect(first.status).toBe('ready');
    const web = await get(first.urls.web!);
    // A PR preview sleeps when idle, so its `url` is the local front door; `internalUrl` stays
    // the app's own port, which siblings call directly.
    expect(web).toEqual({
      app: 'web',
      peer: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      peerPublic: first.urls.api,
      answer: 'hello from api',
    });
    expect(web.peer).not.toBe(first.urls.api);
    const api = await get(first.urls.api!);
    expect(api).toMatchObject({ app: 'api', answer: 'hello from web' });
    expect(api.peer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    // A new commit: every app restarts on the port it had, so the references stay right.
    const next = commitFiles(h.gitRoot, 'acme/duo', { 'peer.js': `${PEER_JS}\n// v2\n` });
    const second = await deploy('acme/duo', next);
    expect(second).toMatchObject({ status: 'ready', lastDeployedSha: next, urls: first.urls });
    expect((await get(second.urls.web!)).answer).toBe('hello from api');
  }, 120_000);

  test('a reference to an app preview.yaml does not declare fails the deploy, naming it', async () => {
    const yaml = YAML.replace('${apps.api.internalUrl}', '${apps.backend.internalUrl}');
    const sha = makeRepo(h.gitRoot, 'acme/typo', { 'preview.yaml': yaml, 'peer.js': PEER_JS });
    const status = await deploy('acme/typo', sha);
    expect(status.status).toBe('failed');
    expect(status.error).toBe(
      `preview.yaml: apps.web.env.PEER_URL: references app backend, which preview.yaml does not declare (in acme/typo@${sha.slice(0, 12)})`,
    );
  }, 120_000);

  test('beside other mistakes, the reference is one of the problems the failed status lists', async () => {
    const yaml = YAML.replace('${apps.api.internalUrl}', '${apps.backend.internalUrl}')
      .replace('port: 8000', 'port: "8000"')
      .replace('command: node peer.js api', 'comand: node peer.js api');
    const sha = makeRepo(h.gitRoot, 'acme/three', { 'preview.yaml': yaml, 'peer.js': PEER_JS });
    const status = await deploy('acme/three', sha);
    expect(status.status).toBe('failed');
    expect(status.error).toBe(
      `preview.yaml has 3 problems (in acme/three@${sha.slice(0, 12)}): ` +
        'apps.api.port: Invalid input: expected number, received string; ' +
        'apps.api: Unrecognized key: "comand"; ' +
        'apps.web.env.PEER_URL: references app backend, which preview.yaml does not declare',
    );
  }, 120_000);
});
