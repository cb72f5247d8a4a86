import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { makeRepo } from '../../../../test/support/git.js';
import { GitSourceHost } from '../../source-host/local-git.js';
import type { TaskOutcome } from '../../workflows/port.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from '../port.js';
import { createNetns, listeningInside, networkIsolationUsable, removeNetns } from './network.js';
import { ProcessRuntime } from './process.js';
import { bubblewrapUsable } from './sandbox.js';

/*
 * Each environment's apps in a network namespace of their own (pasta). Another environment's app and this
 * machine's listeners are out of reach (refused, and not listed in the sandbox's /proc/net/tcp*), siblings
 * reach each other, the host reaches each app at its URL. Needs root, bubblewrap and pasta (CI has them);
 * elsewhere skipped, saying why.
 */

const root = mkdtempSync(join(tmpdir(), 'sandbox-net-'));
const gitRoot = join(root, 'git');
const REPO = 'acme/net';
let sha: string;

const SKIP = !bubblewrapUsable()
  ? 'bubblewrap is not usable here'
  : !networkIsolationUsable(join(root, 'probe'))
    ? 'a network namespace per environment needs root and pasta (apt-get install passt)'
    : undefined;
if (SKIP && !process.env.CI) console.warn(`local/network.test.ts skipped: ${SKIP}`);
const maybe = SKIP && !process.env.CI ? describe.skip : describe;

/** An app: `/secret` answers its NAME, `/fetch?url=` fetches a URL from inside, `/tcp` its /proc/net/tcp*. */
const NET_JS = `
const http = require('http');
const fs = require('fs');
http.createServer(async (req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/healthz') return res.end('ok');
  if (u.pathname === '/secret') return res.end('secret-of-' + process.env.NAME);
  if (u.pathname === '/tcp')
    return res.end(['tcp', 'tcp6'].map((f) => { try { return fs.readFileSync('/proc/net/' + f, 'utf8'); } catch { return ''; } }).join(''));
  if (u.pathname === '/fetch') {
    try {
      const r = await fetch(u.searchParams.get('url'), { signal: AbortSignal.timeout(3000) });
      return res.end(JSON.stringify({ status: r.status, body: await r.text() }));
    } catch (e) {
      return res.end(JSON.stringify({ error: String((e.cause && e.cause.code) || e.message) }));
    }
  }
  res.statusCode = 404;
  res.end();
}).listen(Number(process.env.PORT), '127.0.0.1');
`;
const APP: AppSpec = { port: 3000, command: 'node net.js', health: '/healthz' };

const waiters = new Map<string, (o: TaskOutcome) => void>();
const results = new Map<string, Promise<TaskOutcome>>();
const outcomeOf = (token: string) => {
  if (!results.has(token)) results.set(token, new Promise((r) => waiters.set(token, r)));
  return results.get(token)!;
};
const complete = async (token: string, o: TaskOutcome) => {
  void outcomeOf(token);
  waiters.get(token)!(o);
};
let seq = 0;
const runtimes: ProcessRuntime[] = [];
let host: Server;
let hostPort: number;

beforeAll(async () => {
  sha = makeRepo(gitRoot, REPO, { 'net.js': NET_JS });
  // A listener of this machine (as the control plane's port is): no sandbox may reach it.
  host = createServer((_req, res) => res.end('host-listener-secret'));
  await new Promise<void>((r) => host.listen(0, '127.0.0.1', r));
  hostPort = (host.address() as AddressInfo).port;
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((r) => r.stop()));
});
afterAll(async () => {
  await new Promise((r) => host.close(r));
  rmSync(root, { recursive: true, force: true });
});

function runtime(): ProcessRuntime {
  const dataDir = mkdtempSync(join(root, 'data-'));
  const r = new ProcessRuntime({
    dataDir,
    workDir: join(dataDir, 'work'),
    sourceHost: new GitSourceHost(gitRoot),
    complete,
    readyTimeoutMs: 20_000,
    isolation: 'bwrap',
    network: 'namespace',
  });
  runtimes.push(r);
  return r;
}
const target = (): RuntimeTarget => {
  const pr = ++seq;
  return { orgId: `org-${pr}`, envKey: `${REPO}#${pr}`, repoFullName: REPO, prNumber: pr, generation: 1 };
};

/** Build and start `launches` in `t`; the apps' URLs. */
async function up(
  r: ProcessRuntime,
  t: RuntimeTarget,
  launches: AppLaunch[],
): Promise<Record<string, string>> {
  const specs = Object.fromEntries(launches.map((l) => [l.name, l.spec]));
  const built = `b-${++seq}`;
  await r.build(t, sha, specs, built);
  expect(await outcomeOf(built)).toEqual({ ok: true, output: { builds: expect.any(Object) } });
  await r.deploy(t, launches, { prune: true });
  const ready = `r-${++seq}`;
  await r.awaitReady(t, specs, ready);
  const o = await outcomeOf(ready);
  if (!o.ok) throw new Error(`not ready: ${o.cause}`);
  return o.output.urls as Record<string, string>;
}
const web = (name: string, vars: Record<string, string> = {}): AppLaunch => ({
  name,
  spec: APP,
  vars: { NAME: name, ...vars },
  secretKeys: [],
});
const get = async (url: string) => (await fetch(url, { signal: AbortSignal.timeout(10_000) })).text();
/** What `app` (at `url`) got fetching `target` from inside its sandbox. */
const fetchFrom = async (url: string, target: string) =>
  JSON.parse(await get(`${url}/fetch?url=${encodeURIComponent(target)}`)) as {
    status?: number;
    body?: string;
    error?: string;
  };
const hexPort = (p: number) => `:${p.toString(16).toUpperCase().padStart(4, '0')}`;

maybe('a network namespace per environment (pasta)', () => {
  test("another environment's app and this machine's listeners are out of reach; the host reaches the app", async () => {
    const r = runtime();
    const a = await up(r, target(), [web('a')]);
    const b = await up(r, target(), [web('b')]);
    // From the host, each app answers at its URL.
    expect(await get(`${a.a}/secret`)).toBe('secret-of-a');
    expect(await get(`${b.b}/secret`)).toBe('secret-of-b');
    // From B's sandbox: A's app (its URL is on the host's loopback) and the host's listener are refused.
    const toA = await fetchFrom(b.b!, `${a.a}/secret`);
    expect(toA.body).toBeUndefined();
    expect(toA.error).toBe('ECONNREFUSED');
    const toHost = await fetchFrom(b.b!, `http://127.0.0.1:${hostPort}/`);
    expect(toHost.body).toBeUndefined();
    expect(toHost.error).toBe('ECONNREFUSED');
    const toHost6 = await fetchFrom(b.b!, `http://[::1]:${hostPort}/`);
    expect(toHost6.body).toBeUndefined();
    // Its /proc/net/tcp* lists its own listener only: not the host's, not A's.
    const tcp = await get(`${b.b}/tcp`);
    const bPort = Number(new URL(b.b!).port);
    const aPort = Number(new URL(a.a!).port);
    expect(tcp).toContain(hexPort(bPort));
    expect(tcp).not.toContain(hexPort(hostPort));
    expect(tcp).not.toContain(hexPort(aPort));
  }, 90_000);

  test("readiness reads a namespace's listeners only from a process inside it (not the host's table)", () => {
    // This process is on the host, where `hostPort` listens (as pasta does on each app's port): it is
    // not a listener of the namespace.
    const ns = join(root, 'ns-check');
    createNetns(ns);
    try {
      expect(listeningInside(process.pid, hostPort, ns)).toBe(false);
    } finally {
      removeNetns(ns);
    }
  });

  test('siblings of one environment reach each other at the URLs preview.yaml gives them', async () => {
    const r = runtime();
    // A preview.yaml reference, resolved by the runtime (not a template string).
    const ref = ['$', '{apps.api.url}'].join('');
    const urls = await up(r, target(), [web('api'), web('site', { API_URL: ref })]);
    const fromSite = await fetchFrom(urls.site!, `${urls.api}/secret`);
    expect(fromSite).toEqual({ status: 200, body: 'secret-of-api' });
  }, 90_000);

  test('a redeploy keeps the apps reachable (pasta follows the ports), a teardown removes the namespace', async () => {
    const r = runtime();
    const t = target();
    const first = await up(r, t, [web('api'), web('site')]);
    // Only `site` again, three times in a row: `api` keeps running and stays reachable through the new
    // forwards (each deploy restarts pasta, which must wait for the previous one to let go of the namespace).
    const deployed = `r-${++seq}`;
    for (let i = 0; i < 3; i++) await r.deploy({ ...t }, [web('site')]);
    // Deploys that start nothing restart pasta at once: none may find the previous one still there.
    for (let i = 0; i < 5; i++) await r.deploy({ ...t }, []);
    await r.awaitReady(t, { site: APP }, deployed);
    expect(await outcomeOf(deployed)).toMatchObject({ ok: true });
    expect(await get(`${first.api}/secret`)).toBe('secret-of-api');
    expect(await get(`${first.site}/secret`)).toBe('secret-of-site');
    await r.teardown(t);
    await expect(get(`${first.api}/secret`)).rejects.toThrow();
  }, 90_000);
});
