import { ApiError, api } from './api.js';
import type { Parsed } from './args.js';
import { type Env, environmentRows } from './views.js';

/*
 * `previewctl envs redeploy --all`: every live preview of the organization redeployed at its stored head,
 * so each moves onto the objects the current version writes (on EKS: HTTPRoute, InterceptorRoute and
 * ScaledObject in place of an earlier version's Ingress and HTTPScaledObject, which its deploy removes).
 * Live is `ready` (awake or asleep); an environment in flight is left to its own deploy, a failed one to
 * its owner; torn-down ones are not listed. One line per environment says what happened to it.
 */

/** What one environment's line says, and whether it counts as a failure (exit code 1). */
interface Line {
  label: string;
  said: string;
  failed: boolean;
}

/** What `--all` needs of its caller: how to wait for one environment to settle (`--wait`). */
export interface RedeployAllDeps {
  target: Parameters<typeof api>[0];
  wait: (e: { path: string; label: string }) => Promise<{ result: Record<string, unknown>; code: number }>;
  /** Pause before asking again after a 429 (the organization's fair share of deploys). @default 5000 */
  busyPauseMs?: number;
}

const envPath = (e: Pick<Env, 'repoFullName' | 'prNumber'>) =>
  `/v1/preview/environments/${e.repoFullName.split('/').map(encodeURIComponent).join('/')}/${e.prNumber}`;

/**
 * Redeploy every live environment (of `--repo` only, when given).
 * Steps: list the organization's environments; for each, in repository and PR order: not `ready`, skipped
 * saying its status (torn-down ones left out); `--dry-run`, "would redeploy"; else `PATCH` it (a 429, the
 * fair share of deploys, waited out and asked again, at most 60 times); with `--wait`, wait until it is
 * ready or failed before the next (one preview moving at a time). Exit code 1 when any was refused, did
 * not settle, or ended failed.
 */
export async function redeployAll(p: Parsed, deps: RedeployAllDeps) {
  const repo = p.values.repo as string | undefined;
  const dryRun = p.values['dry-run'] === true;
  const { environments } = await api<{ environments: Env[] }>(
    deps.target,
    'apiKey',
    'GET',
    '/v1/preview/environments',
  );
  const rows = environmentRows(environments, { repo }).filter((e) => e.status !== 'torn_down');
  const lines: Line[] = [];
  for (const env of rows) {
    const label = `${env.repoFullName}#${env.prNumber}`;
    if (env.status !== 'ready') {
      lines.push({ label, said: `skipped: ${env.status}, not live`, failed: false });
      continue;
    }
    if (dryRun) {
      lines.push({ label, said: 'would redeploy', failed: false });
      continue;
    }
    const path = envPath(env);
    const refused = await accepted(deps, path);
    if (refused) {
      lines.push({ label, said: `refused: ${refused}`, failed: true });
      continue;
    }
    if (p.values.wait !== true) {
      lines.push({ label, said: 'redeploying', failed: false });
      continue;
    }
    const settled = await deps.wait({ path, label });
    const r = settled.result;
    lines.push({
      label,
      said:
        typeof r.status === 'string'
          ? `redeployed: ${r.status}${r.error ? ` (${String(r.error)})` : ''}`
          : String(r.error ?? 'did not settle'),
      failed: settled.code !== 0,
    });
  }
  const width = Math.max(0, ...lines.map((l) => l.label.length));
  const text = lines.length
    ? lines.map((l) => `${l.label.padEnd(width)}  ${l.said}`).join('\n')
    : `no environments${repo ? ` of ${repo}` : ''}`;
  return {
    result: {
      dryRun,
      environments: lines.map((l) => ({ environment: l.label, outcome: l.said })),
    },
    text,
    code: lines.some((l) => l.failed) ? 1 : 0,
  };
}

/** PATCH the environment; undefined once accepted, else why not (a 429 is waited out and asked again). */
async function accepted(deps: RedeployAllDeps, path: string): Promise<string | undefined> {
  for (let tries = 0; ; tries++) {
    try {
      await api(deps.target, 'apiKey', 'PATCH', path);
      return undefined;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      if (err.status !== 429 || tries >= 60) return `${err.status} ${err.message}`;
      await new Promise((r) => setTimeout(r, deps.busyPauseMs ?? 5_000));
    }
  }
}
