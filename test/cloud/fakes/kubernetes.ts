/**
 * A loopback fake of the Kubernetes API server, for the EKS runtime's tests and the cloud simulation tier.
 * Test support code, not product. The real `@kubernetes/client-node` talks to it over HTTPS (client-node
 * refuses plain http unless TLS verification is switched off, which the product never does): a self-signed
 * certificate for 127.0.0.1 is made with `openssl` once per process, and `caData` is the CA the fake
 * `eks:DescribeCluster` hands out (kubernetes-aws.ts).
 *
 * What it implements, and only that:
 * - Resources: namespaces (cluster-scoped); configmaps, secrets, services, resourcequotas, pods (core/v1);
 *   deployments (apps/v1); ingresses, networkpolicies (networking.k8s.io/v1); the optional engines' custom
 *   kinds (kubernetes-crds.ts: KEDA's, its HTTP add-on's, the Gateway API's, Envoy Gateway's; each a 404 when
 *   `crds` or `without` leave its CRD out, as on a cluster without that engine; their CRDs' required fields
 *   and a few of their rules checked, the HTTPRoute's per channel). Verbs: create, get, list
 *   (equality-based label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`), replace, patch, delete; pod logs.
 * - Patches: `application/merge-patch+json` (RFC 7386); `application/json-patch+json` (RFC 6902: add,
 *   remove, replace, test), client-node's default; `application/strategic-merge-patch+json` is applied as a
 *   merge patch (lists are replaced whole, not merged by key as the real server does).
 * - Optimistic concurrency: a replace or patch carrying `metadata.resourceVersion`, and a delete with
 *   `preconditions.resourceVersion`, that doesn't match answers 409 Conflict. resourceVersion is one counter
 *   for every write (status changes included); metadata.generation starts at 1 and is bumped when a
 *   Deployment's, Ingress's or NetworkPolicy's `spec` changes.
 * - Errors as the real server writes them: `Status` bodies (kind Status, reason NotFound / AlreadyExists /
 *   Conflict / Forbidden / Invalid / BadRequest / Unauthorized, code). Validation (422) covers names (DNS
 *   labels and subdomains, ≤ 63 for namespaces and services), label keys and values, Ingress hosts, and a
 *   Deployment's selector matching its template: no other schema checks.
 * - Namespaces: deleting one (any propagation policy) marks it Terminating (deletionTimestamp, phase);
 *   creates in it answer 403 "…because it is being terminated", a second delete answers 409; the controller
 *   removes its objects on the next tick and the namespace itself on the one after, then it's a 404.
 *   New namespaces get the `kubernetes.io/metadata.name` label, as the real server sets it.
 * - Authentication: every request must carry `Authorization: Bearer k8s-aws-v1.<base64url URL>`. The URL is
 *   checked for shape (https, the STS host, GetCallerIdentity, SigV4 query parameters, `x-k8s-aws-id`
 *   among the signed headers, X-Amz-Date within 15 minutes). With `verify` set, the signature itself is
 *   recomputed (SigV4, independently of the product's signer) with the test's secret key and the cluster's
 *   name as `x-k8s-aws-id`, so a token for another cluster, or a forged one, is a 401. No STS call is made.
 *
 * The simulated controller (`tick()`, or every `autoAdvanceMs`): one step per Deployment per tick —
 * observe a new spec (observedGeneration, a new pod for the template: updatedReplicas 1, the old pod still
 * counted), start that pod (Running and Ready, or the injected failure), then remove the old pod. So a
 * rollout is ready after three ticks, as `kubectl rollout status` would see it. One pod per template:
 * `replicas` is not simulated beyond 1. A pod whose `envFrom` Secret is missing gets
 * CreateContainerConfigError by itself. `inject(namespace, app, reason)` makes the app's not-yet-ready pods
 * (and later ones) fail with that reason, or its Deployment report ProgressDeadlineExceeded; `clear` undoes
 * it. Pods' logs are what `setLogs` gave the app. Pods of a deleted Deployment go on the next tick.
 * `seed` and `drop` create and remove objects behind the adapter's back (someone else's kubectl), and
 * `beforeNext` runs something before one request is answered (a race staged); `get`,
 * `list`, `requests` and `tokens` are for assertions.
 * A Deployment at 0 replicas has no pod. Jobs (batch/v1): a Job gets its pod on one tick (labelled
 * `job-name`, `batch.kubernetes.io/job-name` and its template's labels; a missing `envFrom` Secret or
 * `secretKeyRef` fails it as CreateContainerConfigError would) and ends on the next: exit 0, or what
 * `jobOutcome` set for its command (exit code and output: the pod's log), `backoffLimit` 0 as written, so
 * a non-zero exit makes it Failed (BackoffLimitExceeded). CloudNativePG Clusters: one tick in 'Setting up
 * primary' (its initdb Secret, and an import's password Secret, must exist to go on), then 'Cluster in
 * healthy state' with its instance ready and its `<name>-rw` Service made (`holdCluster` keeps one in a
 * phase of the test's choosing instead: held, or stuck). `history` records, in order,
 * each Job's start and end and each app pod's creation, for tests of ordering.
 * Not simulated: ReplicaSets, events, watches, scheduling, quotas and network policies being enforced,
 * finalizers, real probes.
 */
import { execFile } from 'node:child_process';
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ALL_CRDS, CRD_RESOURCES, type CrdCheckOptions, crdProblems } from './kubernetes-crds.js';

type Obj = Record<string, any>;

export type FaultReason =
  | 'CrashLoopBackOff'
  | 'ImagePullBackOff'
  | 'ErrImagePull'
  | 'CreateContainerConfigError'
  | 'ProgressDeadlineExceeded';

interface ResourceDef {
  group: string;
  kind: string;
  namespaced: boolean;
  /** Whether spec changes bump metadata.generation. */
  generation?: boolean;
  /** The API version, when not v1 (a CRD's). */
  version?: string;
  /** A CustomResourceDefinition's resource: answered only while its CRD is installed (`crds`). */
  crd?: boolean;
}
const RESOURCES: Record<string, ResourceDef> = {
  namespaces: { group: '', kind: 'Namespace', namespaced: false },
  configmaps: { group: '', kind: 'ConfigMap', namespaced: true },
  secrets: { group: '', kind: 'Secret', namespaced: true },
  services: { group: '', kind: 'Service', namespaced: true },
  resourcequotas: { group: '', kind: 'ResourceQuota', namespaced: true },
  pods: { group: '', kind: 'Pod', namespaced: true },
  deployments: { group: 'apps', kind: 'Deployment', namespaced: true, generation: true },
  jobs: { group: 'batch', kind: 'Job', namespaced: true, generation: true },
  ingresses: { group: 'networking.k8s.io', kind: 'Ingress', namespaced: true, generation: true },
  networkpolicies: { group: 'networking.k8s.io', kind: 'NetworkPolicy', namespaced: true, generation: true },
  // The optional engines' kinds (kubernetes-crds.ts): their CRDs' required fields are checked.
  ...CRD_RESOURCES,
};

class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: Obj,
  ) {
    super(message);
  }
  body(): Obj {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

const clone = <T>(o: T): T => (o === undefined ? o : JSON.parse(JSON.stringify(o)));
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

// ---- TLS: one self-signed certificate per process ------------------------------------------------------

let certificate: Promise<{ key: Buffer; cert: Buffer }> | undefined;
/** A self-signed certificate (its own CA) for 127.0.0.1 and localhost, made with the openssl CLI. */
export function loopbackCertificate(): Promise<{ key: Buffer; cert: Buffer }> {
  certificate ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fake-kube-tls-'));
    try {
      await promisify(execFile)('openssl', [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=fake-kubernetes',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ]);
      return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })();
  return certificate;
}

// ---- patches ---------------------------------------------------------------------------------------------

/** RFC 7386. */
export function mergePatch(target: any, patch: any): any {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch);
  const out: Obj = target && typeof target === 'object' && !Array.isArray(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6902, the operations add, remove, replace and test. */
function jsonPatch(target: Obj, ops: unknown): Obj {
  if (!Array.isArray(ops)) throw new ApiError(400, 'BadRequest', 'json patch must be an array of operations');
  const doc = clone(target);
  for (const op of ops as { op: string; path: string; value?: unknown }[]) {
    const parts = String(op.path)
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop();
    if (last === undefined) throw new ApiError(400, 'BadRequest', `unsupported json patch path ${op.path}`);
    let parent: any = doc;
    for (const p of parts) {
      parent = parent?.[p];
      if (parent === undefined)
        throw new ApiError(422, 'Invalid', `json patch path ${op.path} does not exist`);
    }
    const key: string | number = Array.isArray(parent) ? (last === '-' ? parent.length : Number(last)) : last;
    switch (op.op) {
      case 'add':
        if (Array.isArray(parent)) parent.splice(key as number, 0, clone(op.value));
        else parent[key] = clone(op.value);
        break;
      case 'replace':
        if (!(key in parent)) throw new ApiError(422, 'Invalid', `json patch replace of missing ${op.path}`);
        parent[key] = clone(op.value);
        break;
      case 'remove':
        if (!(key in parent)) throw new ApiError(422, 'Invalid', `json patch remove of missing ${op.path}`);
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete parent[key];
        break;
      case 'test':
        if (JSON.stringify(parent[key]) !== JSON.stringify(op.value))
          throw new ApiError(422, 'Invalid', `json patch test failed at ${op.path}`);
        break;
      default:
        throw new ApiError(400, 'BadRequest', `json patch op ${op.op} is not supported by the fake`);
    }
  }
  return doc;
}

// ---- label selectors -------------------------------------------------------------------------------------

function selectorMatcher(selector: string | null): (labels: Record<string, string> | undefined) => boolean {
  if (!selector) return () => true;
  const terms = selector.split(',').map((t) => t.trim());
  const tests = terms.map((term) => {
    let m = /^([^!=\s]+)\s*(==|=|!=)\s*([^!=\s]*)$/.exec(term);
    if (m) {
      const [, k, op, v] = m as unknown as [string, string, string, string];
      return (l: Record<string, string>) => (op === '!=' ? l[k] !== v : l[k] === v);
    }
    m = /^(!?)([^!=\s]+)$/.exec(term);
    if (m) {
      const [, not, k] = m as unknown as [string, string, string];
      return (l: Record<string, string>) => (not ? !(k in l) : k in l);
    }
    throw new ApiError(
      400,
      'BadRequest',
      `unable to parse requirement: ${term} (the fake supports equality only)`,
    );
  });
  return (labels) => tests.every((t) => t(labels ?? {}));
}

// ---- EKS token checks ------------------------------------------------------------------------------------

export interface TokenCheck {
  clusterName: string;
  region: string;
  /** Recompute the signature with these credentials (the test's); without them only the shape is checked. */
  verify?: { accessKeyId: string; secretAccessKey: string };
}

const rfc3986 = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

/** Why a bearer token would not be accepted by EKS (as far as can be told without STS), or undefined. */
export function tokenProblem(authorization: string | undefined, check: TokenCheck, now = Date.now()) {
  const prefix = 'Bearer k8s-aws-v1.';
  if (!authorization?.startsWith(prefix)) return 'no k8s-aws-v1 bearer token';
  let url: URL;
  try {
    url = new URL(Buffer.from(authorization.slice(prefix.length), 'base64url').toString('utf8'));
  } catch {
    return 'the token is not a base64url URL';
  }
  const q = url.searchParams;
  const host = `sts.${check.region}.amazonaws.com`;
  if (url.protocol !== 'https:' || (url.host !== host && url.host !== 'sts.amazonaws.com'))
    return `the token is not for ${host}`;
  if (q.get('Action') !== 'GetCallerIdentity' || q.get('Version') !== '2011-06-15')
    return 'the token is not a GetCallerIdentity call';
  if (q.get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256') return 'the token is not SigV4-signed';
  const credential = q.get('X-Amz-Credential') ?? '';
  const [akid, day, region, service, terminator] = credential.split('/');
  if (!akid || region !== check.region || service !== 'sts' || terminator !== 'aws4_request')
    return `bad credential scope ${credential}`;
  const signedHeaders = (q.get('X-Amz-SignedHeaders') ?? '').split(';');
  if (!signedHeaders.includes('host') || !signedHeaders.includes('x-k8s-aws-id'))
    return 'x-k8s-aws-id is not among the signed headers';
  const date = q.get('X-Amz-Date') ?? '';
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!m || !day || !date.startsWith(day)) return `bad X-Amz-Date ${date}`;
  const signedAt = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
  if (now - signedAt > 15 * 60_000 || signedAt - now > 5 * 60_000) return 'the token has expired';
  const expires = Number(q.get('X-Amz-Expires'));
  if (!(expires > 0 && expires <= 900)) return `bad X-Amz-Expires ${q.get('X-Amz-Expires')}`;
  const signature = q.get('X-Amz-Signature') ?? '';
  if (!/^[0-9a-f]{64}$/.test(signature)) return 'no signature';
  if (!check.verify) return undefined;
  if (akid !== check.verify.accessKeyId) return `signed by ${akid}, not by the test's key`;
  const query = [...q.entries()]
    .filter(([k]) => k !== 'X-Amz-Signature')
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const headers: Record<string, string> = { host: url.host, 'x-k8s-aws-id': check.clusterName };
  const canonical = [
    'GET',
    url.pathname || '/',
    query,
    ...signedHeaders.map((h) => `${h}:${headers[h] ?? ''}`),
    '',
    signedHeaders.join(';'),
    createHash('sha256').update('').digest('hex'),
  ].join('\n');
  const scope = `${day}/${region}/sts/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', date, scope, createHash('sha256').update(canonical).digest('hex')].join(
    '\n',
  );
  const key = hmac(
    hmac(hmac(hmac(`AWS4${check.verify.secretAccessKey}`, day), region), 'sts'),
    'aws4_request',
  );
  if (createHmac('sha256', key).update(toSign).digest('hex') !== signature)
    return `the signature does not match (a token for another cluster than ${check.clusterName}?)`;
  return undefined;
}

// ---- the fake --------------------------------------------------------------------------------------------

export interface FakeKubernetesOptions {
  /** Token checks; without them any `k8s-aws-v1.` bearer of the right shape for eu-west-1 is accepted. */
  auth?: TokenCheck;
  /** Run the controller every this many ms (0: only `tick()` advances it). */
  autoAdvanceMs?: number;
  /**
   * The CRDs installed (`<plural>.<group>`): their resources answer 404, as on a cluster without them,
   * unless named here. Default: all of kubernetes-crds.ts `ALL_CRDS` (KEDA and its HTTP add-on, the
   * Gateway API, Envoy Gateway). `without` takes some away from that default instead.
   */
  crds?: string[];
  /** Engines missing from the default: every CRD whose group ends with one of these (`keda.sh`, …). */
  without?: string[];
  /** The HTTPRoute CRD's channel (kubernetes-crds.ts). @default 'standard' */
  gatewayChannel?: CrdCheckOptions['gatewayChannel'];
}

interface Fault {
  reason: FaultReason;
  message?: string;
}

export class FakeKubernetes {
  url = '';
  /** The cluster CA: base64 of the certificate's PEM (what `eks:DescribeCluster` answers). */
  caData = '';
  /** Every request: `METHOD path` (query dropped), with the patch content type for PATCH. */
  readonly requests: string[] = [];
  /** Every bearer token seen, in order of first use. */
  readonly tokens: string[] = [];
  private readonly objects = new Map<string, Obj>();
  private readonly before: { request: string; run: () => void }[] = [];
  private rv = 1000;
  private server?: Server;
  private timer?: NodeJS.Timeout;
  private readonly faults = new Map<string, Fault>();
  private readonly appLogs = new Map<string, string[]>();
  private readonly podLogs = new Map<string, string[]>();
  private readonly jobOutcomes = new Map<string, { exitCode: number; logs: string[] }>();
  /** `<ns>/<cluster>` → the phase a CloudNativePG Cluster stays in instead of becoming healthy. */
  private readonly clusterPhases = new Map<string, string>();
  /** In order: `job started <ns>/<name>`, `job succeeded|failed <ns>/<name>`, `pod <ns>/<deployment>`. */
  readonly history: string[] = [];
  /** Namespace → ticks it has been terminating. */
  private readonly terminating = new Map<string, number>();

  private readonly crds: Set<string>;

  constructor(private readonly opts: FakeKubernetesOptions = {}) {
    this.crds = new Set(
      (opts.crds ?? ALL_CRDS).filter((c) => !(opts.without ?? []).some((group) => c.endsWith(`.${group}`))),
    );
  }

  async start(): Promise<this> {
    // KEDA's Helm charts run it and its HTTP add-on in `keda`: that namespace exists where they are installed.
    if ([...this.crds].some((c) => c.endsWith('.keda.sh')))
      this.create('namespaces', '', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'keda' } });
    const { key, cert } = await loopbackCertificate();
    this.caData = cert.toString('base64');
    this.server = createServer({ key, cert }, (req, res) => {
      this.handle(req, res).catch((err: Error) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify(new ApiError(500, 'InternalError', err.message).body()));
      });
    });
    await new Promise<void>((ok) => this.server!.listen(0, '127.0.0.1', () => ok()));
    this.url = `https://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
    if (this.opts.autoAdvanceMs) this.autoAdvance(this.opts.autoAdvanceMs);
    return this;
  }

  async stop(): Promise<void> {
    this.autoAdvance(0);
    await new Promise<void>((done) => {
      if (!this.server) return done();
      this.server.close(() => done());
      this.server.closeAllConnections();
    });
  }

  /** Run the controller every `ms` (0 stops it). */
  autoAdvance(ms: number): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (ms > 0) {
      this.timer = setInterval(() => this.tick(), ms);
      this.timer.unref();
    }
  }

  /** Make the app's pods that are not ready yet (and later ones) fail with `reason`. */
  inject(namespace: string, app: string, reason: FaultReason, message?: string): void {
    this.faults.set(`${namespace}/${app}`, { reason, message });
  }
  clear(namespace: string, app: string): void {
    this.faults.delete(`${namespace}/${app}`);
  }

  /** How a Job running `command` (its container's `sh -c` argument) ends from now on: exit code, output. */
  jobOutcome(command: string, exitCode: number, logs: string[] = []): void {
    this.jobOutcomes.set(command, { exitCode, logs });
  }

  /**
   * Keep the CloudNativePG Cluster `<namespace>/<name>` (now or once created) in `phase` instead of letting
   * it become healthy: 'Setting up primary' holds it, 'Cluster is unrecoverable and needs manual
   * intervention' fails it; undefined lets it go on.
   */
  holdCluster(namespace: string, name: string, phase?: string): void {
    if (phase) this.clusterPhases.set(`${namespace}/${name}`, phase);
    else this.clusterPhases.delete(`${namespace}/${name}`);
  }

  /** What the app's pods (current and later ones) log. */
  setLogs(namespace: string, app: string, lines: string[]): void {
    this.appLogs.set(`${namespace}/${app}`, lines);
    for (const pod of this.list('pods', namespace))
      if (pod.metadata.labels?.app === app) this.podLogs.set(`${namespace}/${pod.metadata.name}`, lines);
  }

  /**
   * Run `fn` before the next request `METHOD /path` is answered, once (a race staged between a read and a
   * write of the adapter: `drop` an object it just read, say).
   */
  beforeNext(request: string, fn: () => void): void {
    this.before.push({ request, run: fn });
  }

  /** Create an object behind the adapter's back (as `kubectl create` would), through the API's own checks. */
  seed(resource: string, namespace: string, body: Obj): Obj {
    return this.create(resource, namespace, clone(body));
  }

  /** Remove an object behind the adapter's back (as `kubectl delete` would, minus its cascade). */
  drop(resource: string, namespace: string, name: string): void {
    this.objects.delete(this.key(resource, namespace, name));
  }

  /** A stored object (a copy), for assertions. */
  get(resource: string, namespace: string, name: string): Obj | undefined {
    return clone(this.objects.get(this.key(resource, namespace, name)));
  }
  /** Stored objects of a resource in a namespace (copies), for assertions. */
  list(resource: string, namespace = ''): Obj[] {
    const prefix = `${resource}/${namespace}/`;
    return [...this.objects.entries()].filter(([k]) => k.startsWith(prefix)).map(([, v]) => clone(v));
  }
  /** Namespaces that exist (Terminating ones included). */
  namespaces(): string[] {
    return this.list('namespaces').map((n) => n.metadata.name);
  }

  // ---- the controller ----------------------------------------------------------------------------------

  /** One step of every Deployment's rollout and every terminating namespace's removal. */
  tick(): void {
    for (const [ns, ticks] of [...this.terminating.entries()]) {
      if (ticks === 0) {
        for (const key of [...this.objects.keys()])
          if (key.split('/')[1] === ns && !key.startsWith('namespaces/')) this.objects.delete(key);
        this.terminating.set(ns, 1);
      } else {
        this.objects.delete(this.key('namespaces', '', ns));
        this.terminating.delete(ns);
      }
    }
    // Pods whose Deployment is gone.
    for (const pod of this.all('pods')) {
      const owner = pod.metadata.annotations?.['fake.kubernetes/deployment'];
      if (owner && !this.objects.has(this.key('deployments', pod.metadata.namespace, owner)))
        this.objects.delete(this.key('pods', pod.metadata.namespace, pod.metadata.name));
    }
    for (const d of this.all('deployments')) {
      if (this.terminating.has(d.metadata.namespace)) continue;
      this.step(d);
    }
    for (const job of this.all('jobs')) if (!this.terminating.has(job.metadata.namespace)) this.stepJob(job);
    for (const c of this.all('clusters'))
      if (!this.terminating.has(c.metadata.namespace)) this.stepCluster(c);
  }

  private stepJob(job: Obj): void {
    const ns = job.metadata.namespace;
    job.status ??= {};
    const status = job.status;
    if (status.succeeded || status.failed) return;
    const now = new Date().toISOString();
    const podName = `${job.metadata.name}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    const container = job.spec.template.spec.containers[0];
    const pod = this.all('pods').find(
      (p) => p.metadata.namespace === ns && p.metadata.labels?.['job-name'] === job.metadata.name,
    );
    if (!pod) {
      const labels = {
        ...(job.spec.template.metadata?.labels ?? {}),
        'job-name': job.metadata.name,
        'batch.kubernetes.io/job-name': job.metadata.name,
      };
      this.objects.set(this.key('pods', ns, podName), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: podName,
          namespace: ns,
          uid: randomUUID(),
          resourceVersion: this.nextRv(),
          creationTimestamp: now,
          labels,
          ownerReferences: [
            { apiVersion: 'batch/v1', kind: 'Job', name: job.metadata.name, controller: true },
          ],
        },
        spec: clone(job.spec.template.spec),
        status: {
          phase: 'Running',
          containerStatuses: [
            {
              name: container.name,
              image: container.image,
              ready: true,
              restartCount: 0,
              state: { running: { startedAt: now } },
            },
          ],
        },
      });
      Object.assign(status, { startTime: now, active: 1 });
      job.metadata.resourceVersion = this.nextRv();
      this.history.push(`job started ${ns}/${job.metadata.name}`);
      return;
    }
    const command = container.command?.[2] ?? container.args?.[1] ?? '';
    const missing = this.missingSecret(pod) ?? this.missingKeyRef(pod);
    const outcome = missing
      ? { exitCode: undefined, logs: [] }
      : (this.jobOutcomes.get(command) ?? { exitCode: 0, logs: [] });
    const s0 = pod.status.containerStatuses[0];
    pod.status.phase = outcome.exitCode === 0 ? 'Succeeded' : 'Failed';
    pod.status.containerStatuses[0] = {
      ...s0,
      ready: false,
      state: missing
        ? { waiting: { reason: 'CreateContainerConfigError', message: missing.message } }
        : {
            terminated: {
              exitCode: outcome.exitCode,
              reason: outcome.exitCode === 0 ? 'Completed' : 'Error',
              startedAt: s0.state?.running?.startedAt ?? now,
              finishedAt: now,
            },
          },
    };
    pod.metadata.resourceVersion = this.nextRv();
    this.podLogs.set(`${ns}/${pod.metadata.name}`, outcome.logs);
    const ok = outcome.exitCode === 0;
    Object.assign(status, {
      active: 0,
      ...(ok ? { succeeded: 1, completionTime: now } : { failed: 1 }),
      conditions: [
        ok
          ? { type: 'Complete', status: 'True', lastTransitionTime: now }
          : {
              type: 'Failed',
              status: 'True',
              reason: 'BackoffLimitExceeded',
              message: 'Job has reached the specified backoff limit',
              lastTransitionTime: now,
            },
      ],
    });
    job.metadata.resourceVersion = this.nextRv();
    this.history.push(`job ${ok ? 'succeeded' : 'failed'} ${ns}/${job.metadata.name}`);
  }

  /** A `secretKeyRef` of the pod's container whose Secret or key is missing. */
  private missingKeyRef(pod: Obj): Fault | undefined {
    for (const e of pod.spec.containers[0].env ?? []) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref || ref.optional) continue;
      const secret = this.objects.get(this.key('secrets', pod.metadata.namespace, ref.name));
      if (!secret) return { reason: 'CreateContainerConfigError', message: `secret "${ref.name}" not found` };
      if (secret.data?.[ref.key] === undefined)
        return {
          reason: 'CreateContainerConfigError',
          message: `couldn't find key ${ref.key} in Secret ${pod.metadata.namespace}/${ref.name}`,
        };
    }
    return undefined;
  }

  private stepCluster(c: Obj): void {
    const ns = c.metadata.namespace;
    c.status ??= {};
    const status = c.status;
    if (status.phase === 'Cluster in healthy state') return;
    const secrets = [
      c.spec.bootstrap?.initdb?.secret?.name,
      ...(c.spec.externalClusters ?? []).map((e: Obj) => e.password?.name),
    ].filter(Boolean);
    const missing = secrets.find((name: string) => !this.objects.has(this.key('secrets', ns, name)));
    const held = this.clusterPhases.get(`${ns}/${c.metadata.name}`);
    if (held) {
      if (status.phase !== held) {
        Object.assign(status, { phase: held, instances: c.spec.instances, readyInstances: 0 });
        c.metadata.resourceVersion = this.nextRv();
      }
      return;
    }
    if (!status.phase || missing) {
      Object.assign(status, {
        phase: 'Setting up primary',
        ...(missing ? { phaseReason: `secret ${missing} not found` } : {}),
        instances: c.spec.instances,
        readyInstances: 0,
      });
      c.metadata.resourceVersion = this.nextRv();
      return;
    }
    const rw = `${c.metadata.name}-rw`;
    if (!this.objects.has(this.key('services', ns, rw)))
      this.create('services', ns, {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: rw, namespace: ns, labels: { 'cnpg.io/cluster': c.metadata.name } },
        spec: { selector: { 'cnpg.io/cluster': c.metadata.name }, ports: [{ port: 5432, name: 'postgres' }] },
      });
    Object.assign(status, {
      phase: 'Cluster in healthy state',
      phaseReason: undefined,
      readyInstances: c.spec.instances,
      writeService: rw,
      currentPrimary: `${c.metadata.name}-1`,
    });
    c.metadata.resourceVersion = this.nextRv();
  }

  private step(d: Obj): void {
    const ns = d.metadata.namespace;
    if (d.spec.replicas === 0) {
      for (const p of this.podsOf(d)) this.objects.delete(this.key('pods', ns, p.metadata.name));
      d.status = { observedGeneration: d.metadata.generation, replicas: 0, updatedReplicas: 0 };
      return;
    }
    const hash = createHash('sha256').update(JSON.stringify(d.spec.template)).digest('hex').slice(0, 10);
    const pods = this.podsOf(d);
    let current = pods.find((p) => p.metadata.labels?.['pod-template-hash'] === hash);
    d.status ??= {};
    const status = d.status;
    if (status.observedGeneration !== d.metadata.generation) {
      status.observedGeneration = d.metadata.generation;
      current ??= this.createPod(d, hash);
      this.progressing(
        d,
        'True',
        'ReplicaSetUpdated',
        `ReplicaSet "${d.metadata.name}-${hash}" is progressing.`,
      );
      this.recount(d, hash);
      return;
    }
    if (!current) {
      this.createPod(d, hash);
      this.recount(d, hash);
      return;
    }
    if (!this.isReady(current)) {
      const app = d.metadata.labels?.app ?? d.metadata.name;
      const fault = this.faults.get(`${ns}/${app}`) ?? this.missingSecret(current);
      if (fault) this.fail(d, current, hash, fault);
      else {
        this.markReady(current);
        if (status.conditions?.some((c: Obj) => c.reason === 'ProgressDeadlineExceeded'))
          this.progressing(
            d,
            'True',
            'ReplicaSetUpdated',
            `ReplicaSet "${d.metadata.name}-${hash}" is progressing.`,
          );
      }
      this.recount(d, hash);
      return;
    }
    const old = pods.filter((p) => p !== current);
    if (old.length) {
      for (const p of old) this.objects.delete(this.key('pods', ns, p.metadata.name));
      this.progressing(
        d,
        'True',
        'NewReplicaSetAvailable',
        `ReplicaSet "${d.metadata.name}-${hash}" has successfully progressed.`,
      );
      this.recount(d, hash);
      return;
    }
    if (!status.conditions?.some((c: Obj) => c.reason === 'NewReplicaSetAvailable')) {
      this.progressing(
        d,
        'True',
        'NewReplicaSetAvailable',
        `ReplicaSet "${d.metadata.name}-${hash}" has successfully progressed.`,
      );
      this.recount(d, hash);
    }
  }

  private podsOf(d: Obj): Obj[] {
    return this.all('pods').filter(
      (p) =>
        p.metadata.namespace === d.metadata.namespace &&
        p.metadata.annotations?.['fake.kubernetes/deployment'] === d.metadata.name,
    );
  }

  private createPod(d: Obj, hash: string): Obj {
    const ns = d.metadata.namespace;
    const name = `${d.metadata.name}-${hash}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    const app = d.metadata.labels?.app ?? d.metadata.name;
    const container = d.spec.template.spec.containers[0];
    const pod: Obj = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: ns,
        uid: randomUUID(),
        resourceVersion: this.nextRv(),
        creationTimestamp: new Date().toISOString(),
        labels: { ...(d.spec.template.metadata?.labels ?? {}), 'pod-template-hash': hash },
        annotations: {
          ...(d.spec.template.metadata?.annotations ?? {}),
          'fake.kubernetes/deployment': d.metadata.name,
        },
        ownerReferences: [
          {
            apiVersion: 'apps/v1',
            kind: 'ReplicaSet',
            name: `${d.metadata.name}-${hash}`,
            uid: randomUUID(),
            controller: true,
          },
        ],
      },
      spec: clone(d.spec.template.spec),
      status: {
        phase: 'Pending',
        conditions: [{ type: 'PodScheduled', status: 'True' }],
        containerStatuses: [
          {
            name: container.name,
            image: container.image,
            imageID: '',
            ready: false,
            started: false,
            restartCount: 0,
            state: { waiting: { reason: 'ContainerCreating' } },
          },
        ],
      },
    };
    this.objects.set(this.key('pods', ns, name), pod);
    this.history.push(`pod ${ns}/${d.metadata.name}`);
    const logs = this.appLogs.get(`${ns}/${app}`);
    if (logs) this.podLogs.set(`${ns}/${name}`, logs);
    return pod;
  }

  private missingSecret(pod: Obj): Fault | undefined {
    for (const from of pod.spec.containers[0].envFrom ?? []) {
      const name = from.secretRef?.name;
      if (
        name &&
        !from.secretRef.optional &&
        !this.objects.has(this.key('secrets', pod.metadata.namespace, name))
      )
        return { reason: 'CreateContainerConfigError', message: `secret "${name}" not found` };
    }
    return undefined;
  }

  private isReady(pod: Obj): boolean {
    return pod.status?.containerStatuses?.[0]?.ready === true;
  }

  private markReady(pod: Obj): void {
    const now = new Date().toISOString();
    const s = pod.status.containerStatuses[0];
    pod.status.phase = 'Running';
    pod.status.conditions = [
      { type: 'PodScheduled', status: 'True' },
      { type: 'Ready', status: 'True' },
      { type: 'ContainersReady', status: 'True' },
    ];
    pod.status.containerStatuses[0] = {
      ...s,
      ready: true,
      started: true,
      state: { running: { startedAt: now } },
    };
    delete pod.status.containerStatuses[0].lastState;
    pod.metadata.resourceVersion = this.nextRv();
  }

  private fail(d: Obj, pod: Obj, hash: string, fault: Fault): void {
    const s = pod.status.containerStatuses[0];
    const image = s.image;
    const now = new Date().toISOString();
    const waiting = (reason: string, message: string) => ({ waiting: { reason, message } });
    switch (fault.reason) {
      case 'CrashLoopBackOff':
        pod.status.phase = 'Running';
        pod.status.containerStatuses[0] = {
          ...s,
          ready: false,
          started: false,
          restartCount: 3,
          state: waiting(
            'CrashLoopBackOff',
            fault.message ??
              `back-off 40s restarting failed container=${s.name} pod=${pod.metadata.name}_${pod.metadata.namespace}(${pod.metadata.uid})`,
          ),
          lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: now, finishedAt: now } },
        };
        break;
      case 'ImagePullBackOff':
        pod.status.containerStatuses[0] = {
          ...s,
          state: waiting('ImagePullBackOff', fault.message ?? `Back-off pulling image "${image}"`),
        };
        break;
      case 'ErrImagePull':
        pod.status.containerStatuses[0] = {
          ...s,
          state: waiting(
            'ErrImagePull',
            fault.message ??
              `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": failed to resolve reference "${image}": not found`,
          ),
        };
        break;
      case 'CreateContainerConfigError':
        pod.status.containerStatuses[0] = {
          ...s,
          state: waiting('CreateContainerConfigError', fault.message ?? "couldn't find key in Secret"),
        };
        break;
      case 'ProgressDeadlineExceeded':
        pod.status.phase = 'Running';
        pod.status.containerStatuses[0] = {
          ...s,
          ready: false,
          started: true,
          state: { running: { startedAt: now } },
        };
        this.progressing(
          d,
          'False',
          'ProgressDeadlineExceeded',
          fault.message ?? `ReplicaSet "${d.metadata.name}-${hash}" has timed out progressing.`,
        );
        break;
    }
    pod.metadata.resourceVersion = this.nextRv();
  }

  private progressing(d: Obj, status: 'True' | 'False', reason: string, message: string): void {
    const now = new Date().toISOString();
    const others = (d.status.conditions ?? []).filter((c: Obj) => c.type !== 'Progressing');
    d.status.conditions = [
      ...others,
      { type: 'Progressing', status, reason, message, lastUpdateTime: now, lastTransitionTime: now },
    ];
  }

  private recount(d: Obj, hash: string): void {
    const pods = this.podsOf(d);
    const ready = pods.filter((p) => this.isReady(p)).length;
    const s = d.status;
    s.replicas = pods.length;
    s.updatedReplicas = pods.filter((p) => p.metadata.labels?.['pod-template-hash'] === hash).length;
    s.readyReplicas = ready;
    s.availableReplicas = ready;
    s.unavailableReplicas = Math.max(0, (d.spec.replicas ?? 1) - ready);
    const now = new Date().toISOString();
    s.conditions = [
      {
        type: 'Available',
        status: ready >= (d.spec.replicas ?? 1) ? 'True' : 'False',
        reason: ready >= (d.spec.replicas ?? 1) ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
        lastUpdateTime: now,
        lastTransitionTime: now,
      },
      ...(s.conditions ?? []).filter((c: Obj) => c.type !== 'Available'),
    ];
    d.metadata.resourceVersion = this.nextRv();
  }

  // ---- the API -----------------------------------------------------------------------------------------

  private key(resource: string, namespace: string, name: string): string {
    return `${resource}/${namespace}/${name}`;
  }
  private all(resource: string): Obj[] {
    return [...this.objects.entries()].filter(([k]) => k.startsWith(`${resource}/`)).map(([, v]) => v);
  }
  private nextRv(): string {
    this.rv += 1;
    return String(this.rv);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'https://fake');
    const contentType = String(req.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim();
    this.requests.push(`${req.method} ${url.pathname}${req.method === 'PATCH' ? ` ${contentType}` : ''}`);
    const hook = this.before.findIndex((b) => b.request === `${req.method} ${url.pathname}`);
    if (hook >= 0) this.before.splice(hook, 1)[0]!.run();
    const send = (code: number, body: unknown, type = 'application/json') => {
      res.writeHead(code, { 'content-type': type });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    try {
      const auth = req.headers.authorization;
      if (auth && !this.tokens.includes(auth)) this.tokens.push(auth);
      const problem = tokenProblem(auth, this.opts.auth ?? { clusterName: '', region: 'eu-west-1' });
      if (problem) throw new ApiError(401, 'Unauthorized', `Unauthorized: ${problem}`);
      const out = this.route(req.method ?? 'GET', url, raw, contentType);
      if (typeof out.body === 'string') send(out.code, out.body, 'text/plain');
      else send(out.code, out.body);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      send(err.code, err.body());
    }
  }

  private route(method: string, url: URL, raw: string, contentType: string): { code: number; body: unknown } {
    const m = /^\/(?:api\/v1|apis\/([^/]+)\/(v1|v1alpha1|v1beta1))\/(.*)$/.exec(url.pathname);
    if (!m) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
    const group = m[1] ?? '';
    const version = m[2] ?? 'v1';
    const parts = m[3]!.split('/').filter(Boolean);
    let resource: string;
    let ns = '';
    let name: string | undefined;
    let sub: string | undefined;
    if (parts[0] === 'namespaces' && parts.length <= 2) {
      resource = 'namespaces';
      name = parts[1];
    } else if (parts[0] === 'namespaces') {
      [, ns, resource, name, sub] = parts as [string, string, string, string?, string?];
    } else throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
    const def = RESOURCES[resource];
    if (
      !def ||
      def.group !== group ||
      (def.version ?? 'v1') !== version ||
      (def.crd && !this.crds.has(`${resource}.${def.group}`)) ||
      (sub && !(resource === 'pods' && sub === 'log'))
    )
      throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
    const body = () => {
      try {
        return raw ? JSON.parse(raw) : {};
      } catch {
        throw new ApiError(400, 'BadRequest', 'the request body is not JSON');
      }
    };
    if (sub === 'log') return { code: 200, body: this.log(ns, name!, url.searchParams) };
    switch (method) {
      case 'GET':
        if (name) return { code: 200, body: this.read(resource, ns, name) };
        return { code: 200, body: this.listing(resource, ns, url.searchParams.get('labelSelector')) };
      case 'POST':
        if (name) break;
        return { code: 201, body: this.create(resource, ns, body()) };
      case 'PUT':
        if (!name) break;
        return { code: 200, body: this.replace(resource, ns, name, body()) };
      case 'PATCH':
        if (!name) break;
        return { code: 200, body: this.patch(resource, ns, name, body(), contentType) };
      case 'DELETE':
        if (!name) break;
        return { code: 200, body: this.remove(resource, ns, name, body(), url.searchParams) };
    }
    throw new ApiError(
      405,
      'MethodNotAllowed',
      `the server does not allow this method on the requested resource`,
    );
  }

  private qualified(resource: string): string {
    const g = RESOURCES[resource]!.group;
    return g ? `${resource}.${g}` : resource;
  }
  private notFound(resource: string, name: string): ApiError {
    return new ApiError(404, 'NotFound', `${this.qualified(resource)} "${name}" not found`, {
      name,
      kind: resource,
      ...(RESOURCES[resource]!.group ? { group: RESOURCES[resource]!.group } : {}),
    });
  }
  private conflict(resource: string, name: string, why: string): ApiError {
    return new ApiError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${this.qualified(resource)} "${name}": ${why}`,
      {
        name,
        kind: resource,
      },
    );
  }
  private stored(resource: string, ns: string, name: string): Obj {
    const o = this.objects.get(this.key(resource, ns, name));
    if (!o) throw this.notFound(resource, name);
    return o;
  }

  private read(resource: string, ns: string, name: string): Obj {
    return clone(this.stored(resource, ns, name));
  }

  private listing(resource: string, ns: string, selector: string | null): Obj {
    const matches = selectorMatcher(selector);
    const def = RESOURCES[resource]!;
    return {
      kind: `${def.kind}List`,
      apiVersion: def.group ? `${def.group}/${def.version ?? 'v1'}` : 'v1',
      metadata: { resourceVersion: String(this.rv) },
      items: this.list(resource, ns).filter((o) => matches(o.metadata.labels)),
    };
  }

  private validate(resource: string, o: Obj): void {
    const causes: { field: string; message: string }[] = [];
    const name: string = o.metadata?.name ?? '';
    if (!name) causes.push({ field: 'metadata.name', message: 'name or generateName is required' });
    else if (resource === 'namespaces' || resource === 'services') {
      if (name.length > 63 || !DNS_LABEL.test(name))
        causes.push({
          field: 'metadata.name',
          message: `a lowercase RFC 1123 label of at most 63 characters: "${name}"`,
        });
      if (resource === 'services' && !/^[a-z]/.test(name))
        causes.push({
          field: 'metadata.name',
          message: `a DNS-1035 label must start with a letter: "${name}"`,
        });
    } else if (name.length > 253 || !DNS_SUBDOMAIN.test(name))
      causes.push({ field: 'metadata.name', message: `a lowercase RFC 1123 subdomain: "${name}"` });
    const labels = (where: string, l: Record<string, string> | undefined) => {
      for (const [k, v] of Object.entries(l ?? {})) {
        const [prefix, key] = k.includes('/') ? (k.split('/') as [string, string]) : [undefined, k];
        if (
          (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) ||
          key.length > 63 ||
          !LABEL_NAME.test(key)
        )
          causes.push({ field: where, message: `invalid label key "${k}"` });
        if (typeof v !== 'string' || v.length > 63 || (v !== '' && !LABEL_NAME.test(v)))
          causes.push({ field: where, message: `invalid label value "${v}" of "${k}"` });
      }
    };
    labels('metadata.labels', o.metadata?.labels);
    if (resource === 'deployments') {
      labels('spec.template.metadata.labels', o.spec?.template?.metadata?.labels);
      const sel = o.spec?.selector?.matchLabels ?? {};
      const tpl = o.spec?.template?.metadata?.labels ?? {};
      if (!Object.keys(sel).length || Object.entries(sel).some(([k, v]) => tpl[k] !== v))
        causes.push({
          field: 'spec.template.metadata.labels',
          message: '`selector` does not match template `labels`',
        });
    }
    if (resource === 'ingresses')
      for (const rule of o.spec?.rules ?? []) {
        const host: string = rule.host ?? '';
        if (host && (!DNS_SUBDOMAIN.test(host) || host.split('.').some((l) => l.length > 63)))
          causes.push({ field: 'spec.rules[].host', message: `invalid host "${host}"` });
      }
    if ((RESOURCES[resource] as { crd?: boolean }).crd)
      causes.push(...crdProblems(resource, o, { gatewayChannel: this.opts.gatewayChannel }));
    if (causes.length)
      throw new ApiError(
        422,
        'Invalid',
        `${RESOURCES[resource]!.kind} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`,
        { name, kind: RESOURCES[resource]!.kind, causes },
      );
  }

  /** Fill server-set fields of a written object (`existing`: what it replaces). */
  private settle(resource: string, ns: string, o: Obj, existing?: Obj): Obj {
    const def = RESOURCES[resource]!;
    o.apiVersion = def.group ? `${def.group}/${def.version ?? 'v1'}` : 'v1';
    o.kind = def.kind;
    o.metadata ??= {};
    if (def.namespaced) o.metadata.namespace = ns;
    else delete o.metadata.namespace;
    o.metadata.uid = existing?.metadata.uid ?? randomUUID();
    o.metadata.creationTimestamp = existing?.metadata.creationTimestamp ?? new Date().toISOString();
    if (existing?.metadata.deletionTimestamp)
      o.metadata.deletionTimestamp = existing.metadata.deletionTimestamp;
    o.metadata.resourceVersion = this.nextRv();
    delete o.metadata.managedFields;
    if (def.generation) {
      const before = existing?.metadata.generation ?? 0;
      const changed = !existing || JSON.stringify(existing.spec) !== JSON.stringify(o.spec);
      o.metadata.generation = changed ? before + 1 : before;
    }
    if (resource === 'namespaces') {
      o.metadata.labels = { ...(o.metadata.labels ?? {}), 'kubernetes.io/metadata.name': o.metadata.name };
      o.spec = { finalizers: ['kubernetes'] };
      o.status = existing?.status ?? { phase: 'Active' };
    }
    if (resource === 'secrets' && o.stringData) {
      o.data = { ...(o.data ?? {}) };
      for (const [k, v] of Object.entries(o.stringData))
        o.data[k] = Buffer.from(String(v)).toString('base64');
      delete o.stringData;
    }
    if (resource === 'services') {
      o.spec ??= {};
      o.spec.clusterIP ??= existing?.spec?.clusterIP ?? `10.100.${(this.rv >> 8) & 255}.${this.rv & 255}`;
      o.spec.clusterIPs ??= [o.spec.clusterIP];
    }
    // Status is a subresource: writes to the object keep it.
    if (['deployments', 'pods', 'jobs', 'clusters'].includes(resource))
      o.status = existing ? existing.status : (o.status ?? {});
    return o;
  }

  private create(resource: string, ns: string, body: Obj): Obj {
    const def = RESOURCES[resource]!;
    const name = body.metadata?.name;
    if (def.namespaced) {
      const namespace = this.objects.get(this.key('namespaces', '', ns));
      if (!namespace)
        throw new ApiError(404, 'NotFound', `namespaces "${ns}" not found`, { name: ns, kind: 'namespaces' });
      if (namespace.metadata.deletionTimestamp)
        throw new ApiError(
          403,
          'Forbidden',
          `${this.qualified(resource)} "${name}" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`,
          {
            name,
            kind: resource,
            causes: [
              {
                reason: 'NamespaceTerminating',
                message: `namespace ${ns} is being terminated`,
                field: 'metadata.namespace',
              },
            ],
          },
        );
    }
    this.validate(resource, body);
    if (this.objects.has(this.key(resource, ns, name)))
      throw new ApiError(409, 'AlreadyExists', `${this.qualified(resource)} "${name}" already exists`, {
        name,
        kind: resource,
      });
    if (body.metadata.resourceVersion)
      throw new ApiError(
        422,
        'Invalid',
        `${def.kind} "${name}" is invalid: metadata.resourceVersion: must be empty on create`,
      );
    const o = this.settle(resource, ns, clone(body));
    this.objects.set(this.key(resource, ns, name), o);
    return clone(o);
  }

  private replace(resource: string, ns: string, name: string, body: Obj): Obj {
    const existing = this.stored(resource, ns, name);
    if (body.metadata?.name !== name)
      throw new ApiError(
        400,
        'BadRequest',
        `the name of the object (${body.metadata?.name}) does not match the name on the URL (${name})`,
      );
    const rv = body.metadata?.resourceVersion;
    if (rv && rv !== existing.metadata.resourceVersion)
      throw this.conflict(
        resource,
        name,
        'the object has been modified; please apply your changes to the latest version and try again',
      );
    this.validate(resource, body);
    const o = this.settle(resource, ns, clone(body), existing);
    this.objects.set(this.key(resource, ns, name), o);
    return clone(o);
  }

  private patch(resource: string, ns: string, name: string, body: unknown, contentType: string): Obj {
    const existing = this.stored(resource, ns, name);
    let patched: Obj;
    if (
      contentType === 'application/merge-patch+json' ||
      contentType === 'application/strategic-merge-patch+json'
    )
      patched = mergePatch(existing, body);
    else if (contentType === 'application/json-patch+json') patched = jsonPatch(existing, body);
    else
      throw new ApiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json`,
      );
    const rv = patched.metadata?.resourceVersion;
    if (rv && rv !== existing.metadata.resourceVersion)
      throw this.conflict(
        resource,
        name,
        'the object has been modified; please apply your changes to the latest version and try again',
      );
    patched.metadata.name = name;
    this.validate(resource, patched);
    const o = this.settle(resource, ns, patched, existing);
    this.objects.set(this.key(resource, ns, name), o);
    return clone(o);
  }

  private remove(resource: string, ns: string, name: string, options: Obj, query: URLSearchParams): Obj {
    const existing = this.stored(resource, ns, name);
    const pre = options?.preconditions ?? {};
    if (pre.resourceVersion && pre.resourceVersion !== existing.metadata.resourceVersion)
      throw this.conflict(
        resource,
        name,
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${existing.metadata.resourceVersion}`,
      );
    if (pre.uid && pre.uid !== existing.metadata.uid)
      throw this.conflict(
        resource,
        name,
        `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${existing.metadata.uid}`,
      );
    const policy = query.get('propagationPolicy') ?? options?.propagationPolicy;
    if (policy && !['Foreground', 'Background', 'Orphan'].includes(policy))
      throw new ApiError(422, 'Invalid', `invalid propagationPolicy ${policy}`);
    if (resource === 'namespaces') {
      if (existing.metadata.deletionTimestamp)
        throw this.conflict(
          resource,
          name,
          'The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.',
        );
      existing.metadata.deletionTimestamp = new Date().toISOString();
      existing.status = { phase: 'Terminating' };
      existing.metadata.resourceVersion = this.nextRv();
      this.terminating.set(name, 0);
      return clone(existing);
    }
    this.objects.delete(this.key(resource, ns, name));
    if (resource === 'pods') this.podLogs.delete(`${ns}/${name}`);
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Success',
      details: { name, kind: resource, uid: existing.metadata.uid },
    };
  }

  private log(ns: string, name: string, q: URLSearchParams): string {
    const pod = this.stored('pods', ns, name);
    const s = pod.status?.containerStatuses?.[0];
    const previous = q.get('previous') === 'true';
    if (previous && !(s?.restartCount > 0))
      throw new ApiError(
        400,
        'BadRequest',
        `previous terminated container "${s?.name}" in pod "${name}" not found`,
      );
    if (!previous && !s?.state?.running && !s?.state?.terminated && !(s?.restartCount > 0))
      throw new ApiError(
        400,
        'BadRequest',
        `container "${s?.name}" in pod "${name}" is waiting to start: ${s?.state?.waiting?.reason ?? 'ContainerCreating'}`,
      );
    const lines = this.podLogs.get(`${ns}/${name}`) ?? [];
    const tail = q.get('tailLines');
    const out = tail ? lines.slice(-Number(tail)) : lines;
    const text = out.length ? `${out.join('\n')}\n` : '';
    // limitBytes: the API server stops after that many bytes of the (tailed) log, from its start.
    const limit = q.get('limitBytes');
    return limit ? Buffer.from(text).subarray(0, Number(limit)).toString('utf8') : text;
  }
}
