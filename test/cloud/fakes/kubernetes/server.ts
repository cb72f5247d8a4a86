/**
 * The fake Kubernetes API server (index.ts has the story): HTTPS on 127.0.0.1, every request's EKS token
 * checked (auth.ts), routed by path to a resource of `RESOURCES` (a CRD's only while it is installed) and a
 * verb of the object store (store.ts); pod logs; the controllers (controller.ts) run by `tick()` or every
 * `autoAdvanceMs`; and what tests stage and assert with. Test support code, not product.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { loopbackCertificate, type TokenCheck, tokenProblem } from './auth.js';
import { Controller } from './controller.js';
import { ALL_CRDS, type CrdCheckOptions } from './crds.js';
import { ApiError, clone, type FaultReason, type Obj, RESOURCES } from './protocol.js';
import { ObjectStore } from './store.js';

export interface FakeKubernetesOptions {
  /** Token checks; without them any `k8s-aws-v1.` bearer of the right shape for eu-west-1 is accepted. */
  auth?: TokenCheck;
  /** Run the controller every this many ms (0: only `tick()` advances it). */
  autoAdvanceMs?: number;
  /**
   * The CRDs installed (`<plural>.<group>`): their resources answer 404, as on a cluster without them,
   * unless named here. Default: all of crds.ts `ALL_CRDS` (KEDA and its HTTP add-on, the Gateway API,
   * Envoy Gateway, CloudNativePG). `without` takes some away from that default instead.
   */
  crds?: string[];
  /** Engines missing from the default: every CRD whose group ends with one of these (`keda.sh`, …). */
  without?: string[];
  /** The HTTPRoute CRD's channel (crds.ts). @default 'standard' */
  gatewayChannel?: CrdCheckOptions['gatewayChannel'];
}

export class FakeKubernetes {
  url = '';
  /** The cluster CA: base64 of the certificate's PEM (what `eks:DescribeCluster` answers). */
  caData = '';
  /** Every request: `METHOD path` (query dropped), with the patch content type for PATCH. */
  readonly requests: string[] = [];
  /** Every bearer token seen, in order of first use. */
  readonly tokens: string[] = [];
  private readonly before: { request: string; run: () => void }[] = [];
  private server?: Server;
  private timer?: NodeJS.Timeout;
  private readonly store: ObjectStore;
  private readonly controller: Controller;
  private readonly crds: Set<string>;

  constructor(private readonly opts: FakeKubernetesOptions = {}) {
    this.crds = new Set(
      (opts.crds ?? ALL_CRDS).filter((c) => !(opts.without ?? []).some((group) => c.endsWith(`.${group}`))),
    );
    this.store = new ObjectStore(opts.gatewayChannel);
    this.controller = new Controller(this.store);
  }

  /** In order: `job started <ns>/<name>`, `job succeeded|failed <ns>/<name>`, `pod <ns>/<deployment>`. */
  get history(): string[] {
    return this.controller.history;
  }

  async start(): Promise<this> {
    // KEDA's Helm charts run it and its HTTP add-on in `keda`: that namespace exists where they are installed.
    if ([...this.crds].some((c) => c.endsWith('.keda.sh')))
      this.store.create('namespaces', '', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'keda' },
      });
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

  /** One step of every controller (controller.ts). */
  tick(): void {
    this.controller.tick();
  }

  /** Make the app's pods that are not ready yet (and later ones) fail with `reason`. */
  inject(namespace: string, app: string, reason: FaultReason, message?: string): void {
    this.controller.faults.set(`${namespace}/${app}`, { reason, message });
  }
  clear(namespace: string, app: string): void {
    this.controller.faults.delete(`${namespace}/${app}`);
  }

  /** How a Job running `command` (its container's `sh -c` argument) ends from now on: exit code, output. */
  jobOutcome(command: string, exitCode: number, logs: string[] = []): void {
    this.controller.jobOutcomes.set(command, { exitCode, logs });
  }

  /**
   * Keep the CloudNativePG Cluster `<namespace>/<name>` (now or once created) in `phase` instead of letting
   * it become healthy: 'Setting up primary' holds it, 'Cluster is unrecoverable and needs manual
   * intervention' fails it; undefined lets it go on.
   */
  holdCluster(namespace: string, name: string, phase?: string): void {
    if (phase) this.controller.clusterPhases.set(`${namespace}/${name}`, phase);
    else this.controller.clusterPhases.delete(`${namespace}/${name}`);
  }

  /** What the app's pods (current and later ones) log. */
  setLogs(namespace: string, app: string, lines: string[]): void {
    this.controller.appLogs.set(`${namespace}/${app}`, lines);
    for (const pod of this.list('pods', namespace))
      if (pod.metadata.labels?.app === app)
        this.store.podLogs.set(`${namespace}/${pod.metadata.name}`, lines);
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
    return this.store.create(resource, namespace, clone(body));
  }

  /** Remove an object behind the adapter's back (as `kubectl delete` would, minus its cascade). */
  drop(resource: string, namespace: string, name: string): void {
    this.store.objects.delete(this.store.key(resource, namespace, name));
  }

  /** A stored object (a copy), for assertions. */
  get(resource: string, namespace: string, name: string): Obj | undefined {
    return this.store.get(resource, namespace, name);
  }
  /** Stored objects of a resource in a namespace (copies), for assertions. */
  list(resource: string, namespace = ''): Obj[] {
    return this.store.list(resource, namespace);
  }
  /** Namespaces that exist (Terminating ones included). */
  namespaces(): string[] {
    return this.list('namespaces').map((n) => n.metadata.name);
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
        if (name) return { code: 200, body: this.store.read(resource, ns, name) };
        return { code: 200, body: this.store.listing(resource, ns, url.searchParams.get('labelSelector')) };
      case 'POST':
        if (name) break;
        return { code: 201, body: this.store.create(resource, ns, body()) };
      case 'PUT':
        if (!name) break;
        return { code: 200, body: this.store.replace(resource, ns, name, body()) };
      case 'PATCH':
        if (!name) break;
        return { code: 200, body: this.store.patch(resource, ns, name, body(), contentType) };
      case 'DELETE':
        if (!name) break;
        return { code: 200, body: this.store.remove(resource, ns, name, body(), url.searchParams) };
    }
    throw new ApiError(
      405,
      'MethodNotAllowed',
      `the server does not allow this method on the requested resource`,
    );
  }

  private log(ns: string, name: string, q: URLSearchParams): string {
    const pod = this.store.stored('pods', ns, name);
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
    const lines = this.store.podLogs.get(`${ns}/${name}`) ?? [];
    const tail = q.get('tailLines');
    const out = tail ? lines.slice(-Number(tail)) : lines;
    const text = out.length ? `${out.join('\n')}\n` : '';
    // limitBytes: the API server stops after that many bytes of the (tailed) log, from its start.
    const limit = q.get('limitBytes');
    return limit ? Buffer.from(text).subarray(0, Number(limit)).toString('utf8') : text;
  }
}
