/**
 * The Kubernetes objects of a preview's services (preview.yaml `services:`), as plain data (eks/services/
 * services.ts writes them; eks/services/setup.ts runs the Jobs):
 * - per service, a `kubernetes.io/basic-auth` Secret `<service>-credentials` (the role and its generated
 *   password), the only place the password is written;
 * - postgres: a CloudNativePG `Cluster` (postgresql.cnpg.io/v1, written for CloudNativePG 1.30) named after
 *   the service: one instance of `ghcr.io/cloudnative-pg/postgresql:<major>`, `bootstrap.initdb` making the
 *   database `app` owned by the role with that Secret's password, the storage size and class of the
 *   settings; `from: main` adds `bootstrap.initdb.import` (type `microservice`) from the main branch
 *   environment's Cluster, declared in `externalClusters`. Apps reach it at `<service>-rw`, the Service
 *   CloudNativePG makes for the primary;
 * - redis: a Deployment and a Service `<service>` of the official `redis:<major>` image, `--requirepass`
 *   from the Secret (in memory: kept across redeploys, which leave it untouched, not across a pod restart);
 * - a Job per seed or migrate: the app's image, env and Secret, `sh -c <command>`, run once.
 *
 * An app's `${services.<name>.url}` becomes the URL with `$(PREVIEW_SERVICE_<NAME>_PASSWORD)` in place of
 * the password, a variable the container gets from the credentials Secret (`secretKeyRef`), listed before
 * the variables that expand it: no password is written in a Deployment's or a Job's plain env.
 */
import type {
  V1Deployment,
  V1EnvVar,
  V1Job,
  V1NetworkPolicy,
  V1Secret,
  V1Service,
} from '@kubernetes/client-node';
import type { ServiceLaunch } from '../../port.js';
import type { CustomObject } from '../client.js';
import { apiVersionOf } from '../engines.js';
import { fitName, LABELS, MANAGED_BY, OBJECT_DEFAULTS, objectName, stamp } from '../objects.js';

/** On every object of a service: the service's name. */
export const SERVICE_LABEL = 'preview-control-plane/service';
/** On every object of a service: its kind (postgres, redis). */
export const SERVICE_KIND_LABEL = 'preview-control-plane/service-kind';
/** On a seed or migrate Job and its pod: the Job's name. */
export const JOB_LABEL = 'preview-control-plane/job';
/** The database every postgres service makes (its owner: the launch's user). */
export const PG_DATABASE = 'app';
export const PG_PORT = 5432;
export const REDIS_PORT = 6379;
/** The NetworkPolicy a main-branch namespace gets when a preview copies one of its databases. */
export const IMPORT_POLICY_NAME = 'preview-services-import';

/** Settings of the services on the cluster (docs/deploy-to-aws.md "Databases"). */
export interface ServiceOptions {
  /** Each Postgres Cluster's volume. @default '1Gi' */
  storageSize?: string;
  /** Its storage class; unset: the cluster's default class. */
  storageClass?: string;
  /** Where the CloudNativePG operator runs (admitted by each preview's NetworkPolicy). @default 'cnpg-system' */
  operatorNamespace?: string;
}
export const SERVICE_DEFAULTS = {
  storageSize: '1Gi',
  operatorNamespace: 'cnpg-system',
  /** A service's container (Postgres, Redis). */
  resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '1', memory: '512Mi' } },
  /** How long one seed or migrate may run. */
  jobDeadlineSeconds: 600,
};

const managed = { [LABELS.managedBy]: MANAGED_BY };
export const serviceLabels = (launch: Pick<ServiceLaunch, 'name' | 'spec'>) => ({
  ...managed,
  [SERVICE_LABEL]: launch.name,
  [SERVICE_KIND_LABEL]: launch.spec.kind,
});
/** Every object of a service (what removal lists). */
export const serviceSelector = `${LABELS.managedBy}=${MANAGED_BY},${SERVICE_LABEL}`;

/** The name of a service's Cluster, or its Deployment and Service (a DNS label starting with a letter). */
export const serviceObjectName = (service: string) => objectName(service);
export const credentialsName = (service: string) => fitName(`${serviceObjectName(service)}-credentials`);
/** The main branch's credentials, copied for an import and removed once the copy is made. */
export const mainCredentialsName = (service: string) =>
  fitName(`${serviceObjectName(service)}-main-credentials`);

/** The variable a container gets a service's password in. */
export function passwordVar(service: string): string {
  return `PREVIEW_SERVICE_${service.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_PASSWORD`;
}

/** The host apps reach a service at, inside the cluster. */
export function serviceHost(ns: string, launch: Pick<ServiceLaunch, 'name' | 'spec'>): string {
  const name = serviceObjectName(launch.name);
  return launch.spec.kind === 'postgres'
    ? `${name}-rw.${ns}.svc.cluster.local`
    : `${name}.${ns}.svc.cluster.local`;
}

/** The connection URL an app's env gets, its password a `$(VAR)` the container expands. */
export function urlTemplate(ns: string, launch: ServiceLaunch): string {
  const password = `$(${passwordVar(launch.name)})`;
  return launch.spec.kind === 'postgres'
    ? `postgres://${launch.user}:${password}@${serviceHost(ns, launch)}:${PG_PORT}/${PG_DATABASE}`
    : `redis://default:${password}@${serviceHost(ns, launch)}:${REDIS_PORT}/0`;
}

/** The password variables of some services, from their credentials Secrets. */
export function passwordEnv(services: string[]): V1EnvVar[] {
  return [...services].sort().map((name) => ({
    name: passwordVar(name),
    valueFrom: { secretKeyRef: { name: credentialsName(name), key: 'password' } },
  }));
}

/** A service's credentials: the role and its password (`kubernetes.io/basic-auth`, as CloudNativePG reads it). */
export function credentialsSecret(ns: string, launch: ServiceLaunch, generation: number): V1Secret {
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  const user = launch.spec.kind === 'postgres' ? launch.user : 'default';
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: credentialsName(launch.name), namespace: ns, labels: serviceLabels(launch) },
      type: 'kubernetes.io/basic-auth',
      data: { username: b64(user), password: b64(launch.password) },
    },
    generation,
    // Not a digest of the password (that would let a reader of the annotation test guesses).
    'credentials',
  );
}

/** The main branch's Cluster a preview's `from: main` copies: where it answers, and its credentials. */
export interface MainSource {
  host: string;
  user: string;
}

/** The operand image of a Postgres major: CloudNativePG's own. */
export const postgresImage = (version: string) => `ghcr.io/cloudnative-pg/postgresql:${version}`;

/** The Postgres major an existing Cluster runs, from its image's tag (`…/postgresql:16` → `16`). */
export function postgresVersionOf(cluster: { spec?: { imageName?: string } }): string | undefined {
  return /:(\d+)(?:[.-][^:/]*)?$/.exec(cluster.spec?.imageName ?? '')?.[1];
}

/** A postgres service's Cluster (CloudNativePG 1.30 `postgresql.cnpg.io/v1`). */
export function clusterObject(
  ns: string,
  launch: ServiceLaunch,
  generation: number,
  opts: ServiceOptions = {},
  main?: MainSource,
): CustomObject {
  const storageClass = opts.storageClass;
  return stamp(
    {
      apiVersion: apiVersionOf('clusters'),
      kind: 'Cluster',
      metadata: { name: serviceObjectName(launch.name), namespace: ns, labels: serviceLabels(launch) },
      spec: {
        instances: 1,
        imageName: postgresImage(launch.spec.version),
        enableSuperuserAccess: false,
        storage: {
          size: opts.storageSize ?? SERVICE_DEFAULTS.storageSize,
          ...(storageClass ? { storageClass } : {}),
        },
        resources: SERVICE_DEFAULTS.resources,
        // A preview's database is disposable: no fsync wait on every commit.
        postgresql: { parameters: { synchronous_commit: 'off' } },
        bootstrap: {
          initdb: {
            database: PG_DATABASE,
            owner: launch.user,
            secret: { name: credentialsName(launch.name) },
            ...(main
              ? {
                  import: {
                    type: 'microservice',
                    databases: [PG_DATABASE],
                    source: { externalCluster: 'main' },
                  },
                }
              : {}),
          },
        },
        ...(main
          ? {
              externalClusters: [
                {
                  name: 'main',
                  connectionParameters: {
                    host: main.host,
                    port: String(PG_PORT),
                    user: main.user,
                    dbname: PG_DATABASE,
                    sslmode: 'require',
                  },
                  password: { name: mainCredentialsName(launch.name), key: 'password' },
                },
              ],
            }
          : {}),
      },
    },
    generation,
  );
}

/** The copy of the main branch's credentials an import reads (removed once the Cluster is up). */
export function mainCredentialsSecret(
  ns: string,
  launch: ServiceLaunch,
  main: V1Secret,
  generation: number,
): V1Secret {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: mainCredentialsName(launch.name), namespace: ns, labels: serviceLabels(launch) },
      type: 'kubernetes.io/basic-auth',
      data: { username: main.data?.username ?? '', password: main.data?.password ?? '' },
    },
    generation,
    'main-credentials',
  );
}

/**
 * In the main branch's namespace: its Clusters' pods admit Postgres connections from the previews of the
 * same repository (namespaces labelled with its org and repo), so their import can read it.
 */
export function importPolicy(
  mainNs: string,
  from: { org: string; repo: string },
  generation: number,
): V1NetworkPolicy {
  return stamp(
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: IMPORT_POLICY_NAME, namespace: mainNs, labels: { ...managed } },
      spec: {
        podSelector: { matchExpressions: [{ key: 'cnpg.io/cluster', operator: 'Exists' }] },
        policyTypes: ['Ingress'],
        ingress: [
          {
            _from: [
              {
                namespaceSelector: {
                  matchLabels: { ...managed, [LABELS.org]: from.org, [LABELS.repo]: from.repo },
                },
              },
            ],
            ports: [{ protocol: 'TCP', port: PG_PORT }],
          },
        ],
      },
    },
    generation,
  );
}

/** A redis service's Deployment: the official image, the password from its Secret, nothing on disk. */
export function redisDeployment(ns: string, launch: ServiceLaunch, generation: number): V1Deployment {
  const labels = serviceLabels(launch);
  const selector = { [SERVICE_LABEL]: launch.name, [SERVICE_KIND_LABEL]: 'redis' };
  return stamp(
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: serviceObjectName(launch.name), namespace: ns, labels },
      spec: {
        replicas: 1,
        revisionHistoryLimit: 1,
        strategy: { type: 'Recreate' },
        selector: { matchLabels: selector },
        template: {
          metadata: { labels: { ...labels } },
          spec: {
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            containers: [
              {
                name: 'redis',
                image: `redis:${launch.spec.version}`,
                args: ['--requirepass', '$(REDIS_PASSWORD)', '--save', '', '--appendonly', 'no'],
                env: [
                  {
                    name: 'REDIS_PASSWORD',
                    valueFrom: { secretKeyRef: { name: credentialsName(launch.name), key: 'password' } },
                  },
                ],
                ports: [{ name: 'redis', containerPort: REDIS_PORT, protocol: 'TCP' }],
                readinessProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 2, failureThreshold: 3 },
                resources: SERVICE_DEFAULTS.resources,
              },
            ],
          },
        },
      },
    },
    generation,
  );
}

export function redisService(ns: string, launch: ServiceLaunch, generation: number): V1Service {
  return stamp(
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: serviceObjectName(launch.name), namespace: ns, labels: serviceLabels(launch) },
      spec: {
        type: 'ClusterIP',
        selector: { [SERVICE_LABEL]: launch.name, [SERVICE_KIND_LABEL]: 'redis' },
        ports: [{ name: 'redis', port: REDIS_PORT, targetPort: 'redis', protocol: 'TCP' }],
      },
    },
    generation,
  );
}

/** A seed or migrate: run once, the app's container as its Deployment runs it, `sh -c <command>`. */
export function jobObject(
  ns: string,
  name: string,
  run: { image: string; command: string; env: V1EnvVar[]; secretName: string },
  generation: number,
): V1Job {
  const labels = { ...managed, [JOB_LABEL]: name };
  return stamp(
    {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, namespace: ns, labels },
      spec: {
        backoffLimit: 0,
        activeDeadlineSeconds: SERVICE_DEFAULTS.jobDeadlineSeconds,
        ttlSecondsAfterFinished: 24 * 3600,
        template: {
          metadata: { labels },
          spec: {
            restartPolicy: 'Never',
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            containers: [
              {
                // The name pod logs are read from (eks/client.ts `podLog`).
                name: 'app',
                image: run.image,
                command: ['/bin/sh', '-c', run.command],
                env: run.env,
                envFrom: [{ secretRef: { name: run.secretName } }],
                resources: OBJECT_DEFAULTS.resources,
              },
            ],
          },
        },
      },
    },
    generation,
  );
}
