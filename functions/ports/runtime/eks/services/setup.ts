/**
 * The watcher's half of a preview's services (the deploy's: eks/services/services.ts): on every check of
 * the rollout watch, before the apps, `advanceSetup` reads the namespace's `preview-services` record (a Secret)
 * and moves it on by one look:
 * 1. the services ready: each Cluster in CloudNativePG's healthy phase with its instance ready (an import's
 *    copied main credentials then removed), each Redis Deployment rolled out;
 * 2. the deploy's Jobs, in order: the first not succeeded is created if missing, waited for while it runs;
 *    one that failed fails the deploy with its command, exit code and the end of its output, masked;
 * 3. all succeeded: what they did recorded (each app's migrated image, each seeded service), the held apps
 *    let start (1 replica), the plan emptied. Then the rollout watch checks the apps as before.
 * The watcher's deadline bounds it all (eks/connection.ts `readyTimeoutMs`). `serviceStatuses` tells the
 * same look as the status answer's `services` map (`creating`, `ready`, `failed`): the deploy step reports
 * it once applied, MarkFailed names the services that failed.
 */
import type { V1Job } from '@kubernetes/client-node';
import { maskSecrets } from '../../../../shared/masking/mask.js';
import type { RuntimeTarget, ServiceState } from '../../port.js';
import { isCode } from '../client.js';
import type { EksConnection } from '../connection.js';
import { generationOf, namespaceName, objectName } from '../objects.js';
import { rolloutState } from '../rollout.js';
import { credentialsName, JOB_LABEL, mainCredentialsName, serviceObjectName } from './objects.js';
import { readSetup, SETUP_NAME, type SetupState, type SetupStep, setupObject } from './services.js';

/** CloudNativePG's phases (api/v1/cluster_types.go): healthy, and those that won't pass by waiting. */
export const CNPG_HEALTHY = 'Cluster in healthy state';
const CNPG_STUCK = [
  'Cluster is unrecoverable and needs manual intervention',
  'Unable to create required cluster objects',
];
/** Lines of a failed Job's output quoted. */
const TAIL_LINES = 10;

export type SetupVerdict =
  | { kind: 'done' }
  | { kind: 'pending'; detail: string }
  | { kind: 'failed'; cause: string }
  | { kind: 'superseded'; cause: string };

export async function advanceSetup(conn: EksConnection, target: RuntimeTarget): Promise<SetupVerdict> {
  const ns = namespaceName(target);
  const gen = target.generation;
  const record = await conn.readOrNull('secrets', ns, SETUP_NAME);
  if (!record) return { kind: 'done' };
  if (generationOf(record) > gen)
    return {
      kind: 'superseded',
      cause: `generation ${generationOf(record)} deployed ${ns}'s services since`,
    };
  const state = readSetup(record);
  const waiting: string[] = [];
  for (const s of state.services) {
    const health = await serviceHealth(conn, ns, s);
    if (health.kind === 'failed') return health;
    if (health.kind === 'pending') {
      waiting.push(health.detail);
      continue;
    }
    // Copied: main's credentials are not needed any more.
    if (s.kind === 'postgres' && s.main) await conn.removeObject('secrets', ns, mainCredentialsName(s.name));
  }
  if (waiting.length) return { kind: 'pending', detail: waiting.join('; ') };
  if (state.steps.length === 0 && state.held.length === 0) return { kind: 'done' };
  for (const step of state.steps) {
    const job = await conn.readOrNull('jobs', ns, step.job);
    if (!job) {
      try {
        await conn.call(`create Job ${ns}/${step.job}`, (k) => k.jobs.create(ns, step.manifest as V1Job));
      } catch (err) {
        if (!isCode(err, 409)) throw err;
      }
      return { kind: 'pending', detail: `${describe(step)} started` };
    }
    if ((job.status?.succeeded ?? 0) >= 1) continue;
    if (jobFailed(job))
      return { kind: 'failed', cause: await jobFailure(conn, ns, step, state.services, job) };
    return { kind: 'pending', detail: `${describe(step)} running` };
  }
  // Every Job succeeded: record it, let the held apps start, empty the plan.
  const migrated = { ...state.migrated };
  const seeded = { ...state.seeded };
  for (const step of state.steps) {
    if (step.what === 'migrate') migrated[step.app] = step.image;
    else if (step.service) seeded[step.service] = true;
  }
  for (const app of state.held) {
    const name = objectName(app);
    const d = await conn.readOrNull('deployments', ns, name);
    if (!d || generationOf(d) > gen || (d.spec?.replicas ?? 1) > 0) continue;
    await conn.call(`release Deployment ${ns}/${name}`, (k) =>
      k.deployments.patch(ns, name, {
        metadata: { resourceVersion: d.metadata?.resourceVersion },
        spec: { replicas: 1 },
      }),
    );
  }
  const next = setupObject(ns, { ...state, migrated, seeded, steps: [], held: [] }, gen);
  next.metadata!.resourceVersion = record.metadata?.resourceVersion;
  await conn.call(`update Secret ${ns}/${SETUP_NAME}`, (k) => k.secrets.replace(ns, SETUP_NAME, next));
  return { kind: 'pending', detail: 'apps starting after their migrate and seed' };
}

/**
 * One look at a service as the cluster has it: a Cluster in CloudNativePG's healthy phase with its instance
 * ready, or a Redis Deployment rolled out, is `ready`; one gone, in a phase that won't pass by waiting, or
 * whose rollout failed is `failed`; anything else is still `pending`.
 */
export async function serviceHealth(
  conn: EksConnection,
  ns: string,
  s: SetupState['services'][number],
): Promise<{ kind: 'ready' } | { kind: 'pending'; detail: string } | { kind: 'failed'; cause: string }> {
  const name = serviceObjectName(s.name);
  if (s.kind === 'postgres') {
    const cluster = (await conn.readOrNull('clusters', ns, name)) as
      | { status?: { phase?: string; phaseReason?: string; readyInstances?: number } }
      | undefined;
    if (!cluster) return { kind: 'failed', cause: `service ${s.name}: its Cluster ${ns}/${name} is gone` };
    const phase = cluster.status?.phase;
    if (phase && CNPG_STUCK.includes(phase))
      return {
        kind: 'failed',
        cause: `service ${s.name}: ${phase}${cluster.status?.phaseReason ? ` (${cluster.status.phaseReason})` : ''}`,
      };
    if (phase !== CNPG_HEALTHY || (cluster.status?.readyInstances ?? 0) < 1)
      return { kind: 'pending', detail: `service ${s.name}: ${phase ?? 'being created'}` };
    return { kind: 'ready' };
  }
  const d = await conn.readOrNull('deployments', ns, name);
  if (!d) return { kind: 'failed', cause: `service ${s.name}: its Deployment ${ns}/${name} is gone` };
  const r = rolloutState(d);
  if (r.state === 'failed') return { kind: 'failed', cause: `service ${s.name}: ${r.reason} (${r.message})` };
  if (r.state !== 'ready') return { kind: 'pending', detail: `service ${s.name}: ${r.detail}` };
  return { kind: 'ready' };
}

/**
 * Each service of the namespace's record as the status answer shows it (`ServiceState`): `ready` once
 * the cluster has it ready and its seed (if this deploy runs one) succeeded; `failed` when its Cluster or
 * Deployment failed (or is gone) or its seed Job failed; else `creating`. No record: none.
 */
export async function serviceStatuses(
  conn: EksConnection,
  target: RuntimeTarget,
): Promise<Record<string, ServiceState['status']>> {
  const ns = namespaceName(target);
  const record = await conn.readOrNull('secrets', ns, SETUP_NAME);
  if (!record) return {};
  const state = readSetup(record);
  const out: Record<string, ServiceState['status']> = {};
  for (const s of state.services) {
    const health = await serviceHealth(conn, ns, s);
    const seed = state.steps.find((step) => step.what === 'seed' && step.service === s.name);
    let status: ServiceState['status'] =
      health.kind === 'ready' ? 'ready' : health.kind === 'failed' ? 'failed' : 'creating';
    if (seed && status === 'ready') {
      const job = await conn.readOrNull('jobs', ns, seed.job);
      status = (job?.status?.succeeded ?? 0) >= 1 ? 'ready' : job && jobFailed(job) ? 'failed' : 'creating';
    }
    out[s.name] = status;
  }
  return out;
}

const jobFailed = (job: V1Job) =>
  (job.status?.failed ?? 0) >= 1 ||
  Boolean(job.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True'));

const describe = (step: SetupStep) =>
  step.what === 'migrate' ? `app ${step.app}: migrate` : `service ${step.service}: seed (in app ${step.app})`;

/**
 * `app api: migrate \`node migrate.js\` failed (exit code 3); its output ends: …`: the Job's pod's exit
 * code and its last lines, with the app's secret values and every service password masked (read from
 * their Secrets). Without the secrets to mask with, the output is withheld.
 */
async function jobFailure(
  conn: EksConnection,
  ns: string,
  step: SetupStep,
  services: { name: string }[],
  job: V1Job,
): Promise<string> {
  const what =
    step.what === 'migrate'
      ? `app ${step.app}: migrate \`${step.command}\``
      : `service ${step.service}: seed \`${step.command}\` (in app ${step.app})`;
  let secrets: string[] | undefined;
  try {
    secrets = [];
    for (const name of [objectName(step.app), ...services.map((s) => credentialsName(s.name))]) {
      const secret = await conn.readOrNull('secrets', ns, name);
      for (const v of Object.values(secret?.data ?? {}))
        secrets.push(Buffer.from(v, 'base64').toString('utf8'));
    }
  } catch {
    secrets = undefined;
  }
  const pods = await conn.call(`list pods of Job ${ns}/${step.job}`, (k) =>
    k.pods.list(ns, `${JOB_LABEL}=${step.job}`),
  );
  const pod = pods[0];
  const terminated = pod?.status?.containerStatuses?.[0]?.state?.terminated;
  const how =
    terminated?.exitCode !== undefined
      ? `exit code ${terminated.exitCode}`
      : (job.status?.conditions?.find((c) => c.type === 'Failed')?.reason ?? 'it did not finish');
  let tail = '(no output)';
  if (!secrets) tail = '(withheld: the secrets to mask it with could not be read)';
  else if (pod?.metadata?.name) {
    const podName = pod.metadata.name;
    const text = await conn
      .call(`read the log of ${ns}/${podName}`, (k) => k.podLog(ns, podName, { tailLines: TAIL_LINES * 2 }))
      .catch(() => '');
    const lines = maskSecrets(String(text ?? ''), secrets)
      .split(/\r?\n/)
      .filter((l) => l.trim())
      .slice(-TAIL_LINES)
      .join('\n');
    if (lines) tail = lines;
  }
  return maskSecrets(`${what} failed (${how}); its output ends:\n${tail}`, secrets ?? []);
}
