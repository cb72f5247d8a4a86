/**
 * The deploy half of a preview's services on the cluster (the objects: eks/services/objects.ts; the
 * watcher's half, which waits for them and runs the Jobs: eks/services/setup.ts). Within the deploy step,
 * before any app is written:
 * 1. refused when a postgres service is declared and CloudNativePG is not installed (`check`);
 * 2. each service made sure of (`ensure`): its credentials Secret, then its Cluster (created once, never
 *    rewritten: a Cluster's bootstrap happens once) or its Redis Deployment and Service; services no longer
 *    declared (or declared with another kind) removed with their objects, a Cluster's volume with it;
 * 3. each app's `${services.<name>.url}` resolved to a URL whose password is a variable from the
 *    credentials Secret (`resolve`);
 * 4. the Jobs planned (`plan`): each app's `migrate` when it starts an image it has not migrated, then the
 *    seed of each service created empty and not seeded yet. With any, the apps are written held
 *    (0 replicas) and the plan is left in the namespace's `preview-services` record for the watcher,
 *    which runs them in order once the services are ready and then lets the apps start.
 */
import type { V1EnvVar, V1Secret } from '@kubernetes/client-node';
import { DeployFailed } from '../../../../shared/step-errors.js';
import { resolveServiceRefs } from '../../app-refs.js';
import type { AppLaunch, RuntimeTarget, ServiceLaunch } from '../../port.js';
import { isCode } from '../client.js';
import type { EksConnection } from '../connection.js';
import { applyFenced } from '../fences.js';
import { dnsSlug, LABELS, labelValue, MANAGED_BY, namespaceName, stamp } from '../objects.js';
import {
  clusterObject,
  credentialsName,
  credentialsSecret,
  IMPORT_POLICY_NAME,
  importPolicy,
  jobObject,
  type MainSource,
  mainCredentialsName,
  mainCredentialsSecret,
  passwordEnv,
  postgresVersionOf,
  redisDeployment,
  redisService,
  SERVICE_DEFAULTS,
  SERVICE_KIND_LABEL,
  SERVICE_LABEL,
  type ServiceOptions,
  serviceHost,
  serviceObjectName,
  serviceSelector,
  urlTemplate,
} from './objects.js';

/**
 * The namespace's record of what its services went through and the Jobs a deploy left to run: a Secret
 * (the runtime's rights include Secrets in preview namespaces, not ConfigMaps: deploy/rbac.yaml), holding
 * no secret value (the Jobs' manifests reference the Secrets that do).
 */
export const SETUP_NAME = 'preview-services';

/** One Job of a deploy's plan, in order. */
export interface SetupStep {
  job: string;
  what: 'migrate' | 'seed';
  app: string;
  service?: string;
  command: string;
  image: string;
  manifest: object;
}

/** What the record holds. */
export interface SetupState {
  /** The image each app last migrated successfully. */
  migrated: Record<string, string>;
  /** Services seeded (or copied, or with nothing to seed): never seeded again. */
  seeded: Record<string, boolean>;
  /** The services the watcher waits for (`main`: an import, whose copied credentials go once it is up). */
  services: { name: string; kind: 'postgres' | 'redis'; main?: boolean }[];
  /** This deploy's Jobs, in order; and the apps held until they succeed. */
  steps: SetupStep[];
  held: string[];
}

const SERVICE_REF = /\$\{services\.([a-z0-9-]+)\.url\}/g;

export function readSetup(record: V1Secret | undefined): SetupState {
  const parse = <T>(key: string, fallback: T): T => {
    try {
      const raw = record?.data?.[key];
      return raw ? (JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) as T) : fallback;
    } catch {
      return fallback;
    }
  };
  return {
    migrated: parse('migrated', {}),
    seeded: parse('seeded', {}),
    services: parse('services', []),
    steps: parse('steps', []),
    held: parse('held', []),
  };
}

export function setupObject(ns: string, state: SetupState, generation: number): V1Secret {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: SETUP_NAME, namespace: ns, labels: { [LABELS.managedBy]: MANAGED_BY } },
      type: 'Opaque',
      data: Object.fromEntries(
        Object.entries(state).map(([k, v]) => [k, Buffer.from(JSON.stringify(v)).toString('base64')]),
      ),
    },
    generation,
  );
}

export class EksServices {
  constructor(
    private readonly conn: EksConnection,
    private readonly opts: ServiceOptions = {},
  ) {}

  /**
   * Refuse, before anything is written, postgres services on a cluster without CloudNativePG, and a
   * `version` other than the one an existing database was created with (its Cluster is never rewritten:
   * the fix is a new database, named in the message).
   */
  async check(ns: string, services: ServiceLaunch[]): Promise<void> {
    const pg = services.filter((s) => s.spec.kind === 'postgres');
    if (!pg.length) return;
    await this.conn.requireKinds(
      ['clusters'],
      ns,
      `preview.yaml's postgres service ${pg.map((s) => s.name).join(', ')}`,
    );
    const changed: string[] = [];
    for (const s of pg) {
      const existing = await this.conn.readOrNull('clusters', ns, serviceObjectName(s.name));
      const running = existing ? postgresVersionOf(existing as { spec?: { imageName?: string } }) : undefined;
      if (running && running !== s.spec.version)
        changed.push(
          `service ${s.name}: postgres ${s.spec.version} declared, but its database was created with postgres ${running}`,
        );
    }
    if (changed.length)
      throw new DeployFailed(
        `${changed.join('; ')}. A database keeps the Postgres version it was created with (its CloudNativePG Cluster is never rewritten): tear the environment down and deploy it again for a new database (its data goes with the old one), give the service a new name, or declare the version it runs`,
      );
  }

  /** Namespaces whose pods the services need admitted: the CloudNativePG operator's, with postgres. */
  admitted(services: ServiceLaunch[]): string[] {
    return services.some((s) => s.spec.kind === 'postgres')
      ? [this.opts.operatorNamespace ?? SERVICE_DEFAULTS.operatorNamespace]
      : [];
  }

  /**
   * Make sure each service exists (created on first use; a Cluster is never rewritten) and remove the
   * ones not in `services`. Returns the names created now.
   */
  async ensure(target: RuntimeTarget, services: ServiceLaunch[]): Promise<{ created: string[] }> {
    const { conn } = this;
    const ns = namespaceName(target);
    const gen = target.generation;
    await this.removeUndeclared(ns, services);
    const created: string[] = [];
    for (const launch of services) {
      await applyFenced(conn, 'secrets', ns, credentialsName(launch.name), gen, () =>
        credentialsSecret(ns, launch, gen),
      );
      const name = serviceObjectName(launch.name);
      if (launch.spec.kind === 'redis') {
        if (!(await conn.readOrNull('deployments', ns, name))) created.push(launch.name);
        await applyFenced(conn, 'deployments', ns, name, gen, () => redisDeployment(ns, launch, gen));
        await applyFenced(conn, 'services', ns, name, gen, (existing) => {
          const service = redisService(ns, launch, gen);
          if (existing?.spec?.clusterIP) service.spec!.clusterIP = existing.spec.clusterIP;
          return service;
        });
        continue;
      }
      if (await conn.readOrNull('clusters', ns, name)) continue;
      const main =
        launch.spec.from === 'main' && target.prNumber !== 0
          ? await this.mainSource(target, launch)
          : undefined;
      try {
        await conn.call(`create Cluster ${ns}/${name}`, (k) =>
          k.clusters.create(ns, clusterObject(ns, launch, gen, this.opts, main) as never),
        );
      } catch (err) {
        if (!isCode(err, 409)) throw err;
      }
      created.push(launch.name);
    }
    return { created };
  }

  /**
   * `from: main`: the main branch environment's Cluster of that name, its credentials copied here and its
   * namespace admitting this repository's previews on Postgres's port. None: the deploy fails saying so.
   */
  private async mainSource(target: RuntimeTarget, launch: ServiceLaunch): Promise<MainSource> {
    const { conn } = this;
    const ns = namespaceName(target);
    const mainNs = namespaceName({ ...target, prNumber: 0 });
    const name = serviceObjectName(launch.name);
    const cluster = await conn.readOrNull('clusters', mainNs, name);
    const secret = cluster
      ? await conn.readOrNull('secrets', mainNs, credentialsName(launch.name))
      : undefined;
    if (!cluster || !secret)
      throw new DeployFailed(
        `service ${launch.name}: from: main, but the main branch's environment runs no postgres service ${launch.name}: deploy the main branch first`,
      );
    await applyFenced(conn, 'secrets', ns, mainCredentialsName(launch.name), target.generation, () =>
      mainCredentialsSecret(ns, launch, secret, target.generation),
    );
    const from = {
      org: labelValue(target.orgId),
      repo: labelValue(dnsSlug(target.repoFullName.replace('/', '-'))),
    };
    // Written once for every preview of the repository (generation 0: never a newer one to fence).
    await applyFenced(conn, 'networkPolicies', mainNs, IMPORT_POLICY_NAME, 0, () =>
      importPolicy(mainNs, from, 0),
    );
    const user = Buffer.from(secret.data?.username ?? '', 'base64').toString('utf8') || launch.user;
    return { host: serviceHost(mainNs, launch), user };
  }

  /** Delete the objects of services not declared (or declared with another kind). */
  private async removeUndeclared(ns: string, services: ServiceLaunch[]): Promise<void> {
    const { conn } = this;
    const keep = (labels: Record<string, string> | undefined) =>
      services.some(
        (s) => s.name === labels?.[SERVICE_LABEL] && s.spec.kind === labels?.[SERVICE_KIND_LABEL],
      );
    for (const kind of ['clusters', 'services', 'deployments', 'secrets'] as const) {
      for (const item of await conn.listOptional(kind, ns, serviceSelector)) {
        const name = item.metadata?.name;
        if (!name || keep(item.metadata?.labels)) continue;
        await conn.removeObject(kind, ns, name);
      }
    }
  }

  /**
   * `launches` with each `${services.<name>.url}` resolved (the password a `$(VAR)`), each with the
   * variables of the credentials it references; every password is masked in what quotes the app.
   */
  resolve(
    ns: string,
    launches: AppLaunch[],
    services: ServiceLaunch[],
  ): { apps: AppLaunch[]; env: Record<string, V1EnvVar[]> } {
    const urls = Object.fromEntries(services.map((s) => [s.name, urlTemplate(ns, s)]));
    const passwords = services.map((s) => s.password);
    const env: Record<string, V1EnvVar[]> = {};
    const apps = launches.map((launch) => {
      const referenced = new Set<string>();
      for (const [key, value] of Object.entries(launch.vars))
        if (!launch.secretKeys.includes(key))
          for (const m of value.matchAll(SERVICE_REF)) if (Object.hasOwn(urls, m[1]!)) referenced.add(m[1]!);
      env[launch.name] = passwordEnv([...referenced]);
      return resolveServiceRefs(launch, urls, passwords);
    });
    return { apps, env };
  }

  /**
   * The Jobs this deploy needs, in order (each app's migrate of a new image, then each new service's
   * seed), written to the namespace's record with the apps they hold. `run` gives the container an
   * app runs in (image, env, Secret): the Jobs run the same.
   */
  async plan(
    target: RuntimeTarget,
    apps: AppLaunch[],
    services: ServiceLaunch[],
    run: (app: AppLaunch) => { image: string; env: V1EnvVar[]; secretName: string },
  ): Promise<SetupState> {
    const { conn } = this;
    const ns = namespaceName(target);
    const gen = target.generation;
    const existing = await conn.readOrNull('secrets', ns, SETUP_NAME);
    const before = readSetup(existing);
    const empty: SetupState = { ...before, services: [], steps: [], held: [] };
    // Nothing to run, now or before: no record for an environment without services or migrations.
    if (!existing && services.length === 0 && !apps.some((a) => a.spec.migrate)) return empty;
    const declared = new Set(services.map((s) => s.name));
    const seeded = Object.fromEntries(Object.entries(before.seeded).filter(([name]) => declared.has(name)));
    const steps: SetupStep[] = [];
    const job = (what: string, who: string) => `${serviceObjectName(who)}-${what}-g${gen}`.slice(0, 63);
    for (const app of apps) {
      if (!app.spec.migrate || !app.image || before.migrated[app.name] === app.image) continue;
      const c = run(app);
      const name = job('migrate', app.name);
      steps.push({
        job: name,
        what: 'migrate',
        app: app.name,
        command: app.spec.migrate,
        image: c.image,
        manifest: jobObject(ns, name, { ...c, command: app.spec.migrate }, gen),
      });
    }
    for (const service of services) {
      if (seeded[service.name]) continue;
      const copied = service.spec.from === 'main' && target.prNumber !== 0;
      if (copied || !service.spec.seed) {
        seeded[service.name] = true;
        continue;
      }
      const app = apps.find((a) => a.name === service.spec.seedApp);
      if (!app)
        throw new DeployFailed(
          `service ${service.name}: its seed app ${service.spec.seedApp} is not part of this deploy`,
        );
      const c = run(app);
      const name = job('seed', service.name);
      steps.push({
        job: name,
        what: 'seed',
        app: app.name,
        service: service.name,
        command: service.spec.seed,
        image: c.image,
        manifest: jobObject(ns, name, { ...c, command: service.spec.seed }, gen),
      });
    }
    const state: SetupState = {
      migrated: before.migrated,
      seeded,
      services: services.map((s) => ({
        name: s.name,
        kind: s.spec.kind,
        ...(s.spec.from === 'main' && target.prNumber !== 0 ? { main: true } : {}),
      })),
      steps,
      held: steps.length ? apps.map((a) => a.name) : [],
    };
    await applyFenced(conn, 'secrets', ns, SETUP_NAME, gen, () => setupObject(ns, state, gen));
    return state;
  }
}
