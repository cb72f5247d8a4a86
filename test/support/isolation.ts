import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from '@jest/globals';
import {
  createApplication,
  createOrganization,
  type OrgCredentials,
} from '../../functions/core/applications/applications.js';
import { bubblewrapUsable } from '../../functions/ports/runtime/local/sandbox.js';
import type { LocalService } from '../../lib/local/server.js';
import { bearer, call } from './api.js';
import { hit, pollUntil, SERVER_JS, settled } from './apps.js';
import { commitFiles, makeRepo } from './git.js';

/*
 * The isolation attack, as it was found: organization B deploys a repository whose build and app read every
 * /proc/*\/environ, walk up from their working copy and through the data dir, the work dir, the git root
 * and a few usual places, and print all they find (the build fails with it, so it lands in B's status
 * `error`; the app serves it as its page and logs it). Organization A meanwhile runs an app holding a
 * secret. Nothing of A (its secret, its credentials, its sources) and nothing of the server (its own
 * environment, the secrets key) may show up anywhere B can read it.
 */

/**
 * Why the isolation tests cannot run here, or undefined when they can. They must run in CI (`.ci/run`
 * installs bubblewrap): there the test runs regardless, and fails if bubblewrap is not usable.
 */
export function isolationSkipReason(): string | undefined {
  if (process.env.CI || bubblewrapUsable()) return undefined;
  return 'bubblewrap is not usable on this machine (apt-get install bubblewrap); CI runs it';
}

/** The attacker's program: `node probe.js build` prints what it finds; `node probe.js serve` serves it. */
const PROBE_JS = `
const fs = require('fs');
const path = require('path');
const http = require('http');
const safe = (f, d) => { try { return f(); } catch { return d; } };
const own = new Set(Object.entries(process.env).map(([k, v]) => k + '=' + v));
// The Node the sandbox lends its programs (its own install, like /usr's): nothing of anyone's in it.
const nodeHome = path.dirname(path.dirname(process.execPath));
function probe() {
  const found = { procs: 0, ownEntries: 0, environ: [], dirs: [], files: [] };
  for (const p of safe(() => fs.readdirSync('/proc'), [])) {
    if (!/^\\d+$/.test(p)) continue;
    found.procs++;
    for (const e of safe(() => fs.readFileSync('/proc/' + p + '/environ', 'utf8'), '').split('\\0')) {
      if (!e) continue;
      if (own.has(e)) found.ownEntries++;
      else if (!found.environ.includes(e)) found.environ.push(e);
    }
  }
  const roots = JSON.parse(process.env.PROBE_PATHS || '[]');
  for (let d = process.cwd(); d !== path.dirname(d); ) { d = path.dirname(d); roots.push(d); }
  const seen = new Set();
  let budget = 4000;
  const walk = (p, depth) => {
    if (budget-- <= 0 || seen.has(p)) return;
    seen.add(p);
    const st = safe(() => fs.lstatSync(p));
    if (!st) return;
    if (st.isDirectory()) {
      if (p === process.cwd() || p === nodeHome || ['/proc', '/sys', '/dev', '/usr', '/etc', '/lib', '/bin'].includes(p)) return;
      if (p.endsWith('/node_modules') || p.endsWith('/.git')) return;
      found.dirs.push(p);
      if (depth < 8) for (const e of safe(() => fs.readdirSync(p), [])) walk(path.join(p, e), depth + 1);
    } else if (st.isFile() && st.size < 65536) {
      const b = safe(() => fs.readFileSync(p));
      if (b) found.files.push({ path: p, text: b.toString('utf8'), base64: b.toString('base64'), hex: b.toString('hex') });
    }
  };
  for (const r of roots) walk(r, 0);
  return found;
}
function summary(found) {
  // What an attacker would want first: secret-looking variables and key files, on one short line.
  const vars = found.environ.filter((e) => /SECRET|TOKEN|KEY|PASS/i.test(e.split('=')[0]));
  const keys = found.files.filter((f) => /credentials|secret|\\.key$/.test(f.path)).map((f) => f.path + ':' + (f.path.endsWith('.key') ? f.base64 : f.text.replace(/\\s+/g, '')));
  // Short enough to be quoted whole in a status error (its last output lines, 500 characters).
  const loot = ('vars=' + vars.join(',') + ' files=' + keys.join(',')).slice(0, 380);
  return 'PROBE-SUMMARY procs=' + found.procs + ' own=' + found.ownEntries + ' ' + loot;
}
if (process.argv[2] === 'build') {
  const found = probe();
  console.log('PROBE ' + JSON.stringify(found));
  console.log(summary(found));
  process.exit(Number(process.env.PROBE_EXIT || 0));
}
http.createServer(async (req, res) => {
  if (req.url === '/healthz') { res.writeHead(200); return res.end('ok'); }
  if (req.url.startsWith('/net?')) {
    // What it gets from each URL (the control plane, another organization's app) over the network.
    const urls = JSON.parse(new URL(req.url, 'http://x').searchParams.get('urls'));
    const got = {};
    for (const u of urls) {
      try {
        const r = await fetch(u, { signal: AbortSignal.timeout(3000) });
        got[u] = r.status + ' ' + (await r.text()).slice(0, 200);
      } catch (e) {
        got[u] = 'error ' + ((e.cause && e.cause.code) || e.message);
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify(got));
  }
  const found = probe();
  console.log('PROBE ' + JSON.stringify(found));
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(summary(found) + '\\n' + JSON.stringify(found));
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

export interface AttackContext {
  service: LocalService;
  gitRoot: string;
  /** Where working copies are (the default one or PREVIEW_WORK_DIR). */
  workRoot: string;
  /** The server's own log lines. */
  logs: string[];
}

/** Every file under `dir` (logs), with its text. */
function filesUnder(dir: string): { path: string; text: string }[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((rel) => join(dir, rel))
    .filter((p) => statSync(p).isFile())
    .map((p) => ({ path: p, text: readFileSync(p, 'utf8') }));
}

/**
 * The server's own environment as the kernel keeps it (what /proc/<pid>/environ shows), less what every
 * app gets from it anyway (INHERITED_VARS of the runtime) and what B has of its own.
 */
function serverEnvEntries(): string[] {
  const inherited = new Set(['PATH', 'HOME', 'LANG', 'TMPDIR', 'TZ', 'NODE_EXTRA_CA_CERTS', 'SHELL']);
  return readFileSync('/proc/self/environ', 'utf8')
    .split('\0')
    .filter((e) => e.length >= 8 && e.includes('='))
    .filter((e) => !inherited.has(e.slice(0, e.indexOf('='))));
}

/** Run the isolation attack against a running local server and assert it finds nothing. */
export async function attackFindsNothing(ctx: AttackContext): Promise<void> {
  const { service, gitRoot } = ctx;
  const h = { url: service.url };
  const orgA: OrgCredentials = service.credentials; // the one in <data dir>/credentials.json
  const orgB = await createOrganization('intruder');
  const tag = randomBytes(6).toString('hex');

  // Organization A: an app holding a secret, running.
  const secret = `A-SECRET-${tag}-${randomBytes(12).toString('hex')}`;
  const sourceMarker = `A-SOURCE-${tag}`;
  const vaultSha = makeRepo(gitRoot, `acme/vault-${tag}`, {
    'preview.yaml':
      'apps:\n  web:\n    port: 3000\n    command: node server.js vault\n    health: /healthz\n' +
      '    env: { SHOW: VAULT_TOKEN }\n',
    'server.js': SERVER_JS,
    VERSION: 'vault',
    'MARKER.txt': sourceMarker,
  });
  const { applicationId: vaultApp } = await createApplication({
    orgId: orgA.orgId,
    repoFullName: `acme/vault-${tag}`,
  });
  const put = await call(h, 'PUT', `/v1/preview/secrets/${vaultApp}/web/VAULT_TOKEN`, {
    body: { value: secret },
    headers: bearer(orgA),
  });
  expect(put.status).toBe(200);
  const vaultPath = `/v1/preview/environments/acme/vault-${tag}/1`;
  await call(h, 'POST', '/v1/preview/environments', {
    body: { repoFullName: `acme/vault-${tag}`, prNumber: 1, headSha: vaultSha, headRef: 'main' },
    headers: bearer(orgA),
  });
  const vault = await pollUntil(h, orgA, vaultPath, settled, 60_000);
  expect(vault.status).toBe('ready');
  // The secret is really in A's running process (so there is something to steal).
  expect((await hit(vault.urls.web!)).env).toEqual({ VAULT_TOKEN: secret });

  // Organization B: the probe, as a failing build (PR 1) and as a build and an app (PR 2).
  const probeRepo = `intruder/probe-${tag}`;
  const paths = JSON.stringify([
    service.dataDir,
    ctx.workRoot,
    gitRoot,
    join(service.dataDir, '..'),
    '/tmp',
    '/root',
    '/home',
    '/work',
  ]);
  const yaml = (build: string, exit: number) =>
    `apps:\n  web:\n    port: 3000\n    build: ${build}\n    command: node probe.js serve\n    health: /healthz\n` +
    `    env: { PROBE_EXIT: "${exit}", PROBE_PATHS: '${paths}' }\n`;
  const failingSha = makeRepo(gitRoot, probeRepo, {
    'preview.yaml': yaml('node probe.js build', 3),
    'probe.js': PROBE_JS,
  });
  const servingSha = commitFiles(gitRoot, probeRepo, { 'preview.yaml': yaml('node probe.js build', 0) });
  await createApplication({ orgId: orgB.orgId, repoFullName: probeRepo });
  const deployB = async (pr: number, sha: string) => {
    const res = await call(h, 'POST', '/v1/preview/environments', {
      body: { repoFullName: probeRepo, prNumber: pr, headSha: sha, headRef: `probe-${pr}` },
      headers: bearer(orgB),
    });
    expect(res.status).toBe(202);
    return pollUntil(h, orgB, `/v1/preview/environments/${probeRepo}/${pr}`, settled, 60_000);
  };
  const failed = await deployB(1, failingSha);
  const served = await deployB(2, servingSha);
  expect(failed.status).toBe('failed');
  // The probe ran, and saw its own environment (the reading works; there was just nothing else to see).
  expect(failed.error).toContain('PROBE-SUMMARY');
  expect(served.status).toBe('ready');
  const page = await (await fetch(served.urls.web!)).text();
  expect(page).toMatch(/^PROBE-SUMMARY procs=\d+ own=[1-9]/);

  // Run confinement: over the network, B's app reaches neither the control plane nor A's app, where each
  // environment has a network of its own (as root with pasta: always in CI, which runs as root).
  const targets = [`${service.url}/openapi.json`, `${service.url}/healthz`, `${vault.urls.web}/`];
  const reached = (await (
    await fetch(`${served.urls.web}/net?urls=${encodeURIComponent(JSON.stringify(targets))}`)
  ).json()) as Record<string, string>;
  if (service.runtime.network === 'namespace' || process.env.CI) {
    expect(service.runtime.network).toBe('namespace');
    for (const t of targets) expect([t, reached[t]]).toEqual([t, 'error ECONNREFUSED']);
  }

  // Where B could have got anything: its statuses, its page, its logs; and the server's own log.
  const statuses = await Promise.all(
    [1, 2].map((pr) =>
      call(h, 'GET', `/v1/preview/environments/${probeRepo}/${pr}`, { headers: bearer(orgB) }),
    ),
  );
  const bLogs = filesUnder(join(service.dataDir, 'runtime', orgB.orgId));
  expect(bLogs.map((f) => f.text).join('\n')).toContain('PROBE ');
  const seenByB: [string, string][] = [
    ['status error of the failing build', failed.error ?? ''],
    ...statuses.map((s, i): [string, string] => [`status of PR ${i + 1}`, s.text]),
    ['page of the app', page],
    ...bLogs.map((f): [string, string] => [`log ${f.path}`, f.text]),
  ];

  // What must not be there: A's secret, A's credentials, A's sources, the server's key and environment.
  const secretsKey = readFileSync(join(service.dataDir, 'secrets.key'));
  const keySecret = orgA.apiKey.split('_').pop()!;
  const forbidden: [string, string][] = [
    ["A's secret", secret],
    ["A's API key", orgA.apiKey],
    ["A's API key secret", keySecret],
    ["A's client secret", orgA.clientSecret],
    ["A's organization id (names its working copies)", orgA.orgId],
    ["A's sources", sourceMarker],
    ['the secrets key (base64)', secretsKey.toString('base64')],
    ['the secrets key (hex)', secretsKey.toString('hex')],
    ...serverEnvEntries().map((e): [string, string] => [`the server's environment (${e.split('=')[0]})`, e]),
  ];
  const leaks: string[] = [];
  for (const [where, text] of seenByB)
    for (const [what, value] of forbidden) if (text.includes(value)) leaks.push(`${what} in ${where}`);
  expect(leaks).toEqual([]);
  // Nor did anything of it reach the server's own log by way of B's deploys.
  const serverLog = ctx.logs.join('\n');
  for (const value of [secret, orgA.apiKey, keySecret, orgA.clientSecret])
    expect(serverLog).not.toContain(value);
}
