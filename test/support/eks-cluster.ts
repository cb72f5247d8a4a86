import { afterAll, beforeAll, jest } from '@jest/globals';
import { EksCluster, type EksClusterOptions } from '../../functions/ports/runtime/eks/cluster.js';
import type { AppLaunch, AppSpec, RuntimeTarget } from '../../functions/ports/runtime/port.js';
import type { TaskOutcome } from '../../functions/ports/workflows/port.js';
import { setLogSink } from '../../functions/shared/log.js';
import { FakeKubernetes } from '../cloud/fakes/kubernetes/index.js';
import { FakeEksAndLambda } from '../cloud/fakes/kubernetes-aws.js';

/*
 * The EKS cluster adapter's unit tests (functions/ports/runtime/eks/cluster*.test.ts) share this: the
 * loopback fake Kubernetes API (test/cloud/fakes/kubernetes/) reached by the real @kubernetes/client-node,
 * found through a fake eks:DescribeCluster, authenticated with a real STS-presigned token that the fake
 * verifies (SigV4 recomputed with these test credentials); the adapter built on it; and the tokens its
 * rollout watcher completes. The watcher runs in-process (an injected invoker) unless a test says otherwise.
 * A file that calls `useFakeCluster()` gets its own fake, started before its tests and stopped after.
 */

export const REGION = 'eu-west-1';
export const CLUSTER = 'previews';
export const CREDENTIALS = { accessKeyId: 'AKIAFAKEFAKEFAKEFAKE', secretAccessKey: 'fake-secret-access-key' };
export const DOMAIN = 'preview.example.com';
export const IMAGE = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'a'.repeat(64)}`;
export const IMAGE2 = `000000000000.dkr.ecr.eu-west-1.amazonaws.com/preview-apps@sha256:${'b'.repeat(64)}`;
export const SECRET = 'hunter2-very-secret-value';
export const TICK_MS = 20;

export const WEB: AppSpec = { port: 3000, health: '/healthz', env: { MODE: 'web' } };
export const API: AppSpec = { port: 4000 };

export let kube: FakeKubernetes;
export let aws: FakeEksAndLambda;
/** The tokens completed so far, each with its outcome. */
export const outcomes = new Map<string, TaskOutcome>();
const waiters = new Map<string, (o: TaskOutcome) => void>();
const watchers: Promise<unknown>[] = [];
let tokenSeq = 0;
let pr = 100;

/** Starts this file's fake cluster (and fake EKS and Lambda) before its tests; stops them after. */
export function useFakeCluster() {
  // Each test drives the real @kubernetes/client-node against a loopback fake: seconds on a busy machine.
  jest.setTimeout(30_000);
  beforeAll(async () => {
    setLogSink(() => undefined);
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
    kube = await new FakeKubernetes({
      auth: { clusterName: CLUSTER, region: REGION, verify: CREDENTIALS },
      autoAdvanceMs: TICK_MS,
    }).start();
    aws = await new FakeEksAndLambda(REGION).addCluster(CLUSTER, kube).start();
  });
  afterAll(async () => {
    await Promise.allSettled(watchers);
    await aws?.stop();
    await kube?.stop();
  });
}

async function complete(token: string, outcome: TaskOutcome) {
  if (outcomes.has(token)) return; // a task completes once
  outcomes.set(token, outcome);
  waiters.get(token)?.(outcome);
}
export function outcomeOf(token: string, ms = 20_000): Promise<TaskOutcome> {
  const done = outcomes.get(token);
  if (done) return Promise.resolve(done);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`token ${token} not completed within ${ms} ms`)), ms);
    waiters.set(token, (o) => {
      clearTimeout(timer);
      resolve(o);
    });
  });
}
export const newToken = () => `token-${++tokenSeq}`;
/** A PR number of its own for the next test (a namespace no earlier test touched); the targets use it. */
export const nextPr = () => ++pr;
export const target = (generation = 1, over: Partial<RuntimeTarget> = {}): RuntimeTarget => ({
  orgId: 'org-eks',
  envKey: `acme/shop#${pr}`,
  repoFullName: 'acme/shop',
  prNumber: pr,
  generation,
  ...over,
});
export const at = (t: RuntimeTarget, generation: number) => ({ ...t, generation });
export function launch(
  name: string,
  spec: AppSpec,
  secret = SECRET,
  image: string | undefined = IMAGE,
): AppLaunch {
  return {
    name,
    spec,
    vars: { ...spec.env, DATABASE_PASSWORD: secret },
    secretKeys: ['DATABASE_PASSWORD'],
    ...(image ? { image } : {}),
  };
}

export function cluster(over: Partial<EksClusterOptions> = {}): EksCluster {
  const c: EksCluster = new EksCluster({
    clusterName: CLUSTER,
    region: REGION,
    // The Ingress path (an explicit choice), as these files' objects are asserted; the Gateway path and the
    // front door's objects: door/front-door.test.ts.
    routing: 'ingress',
    ingressClassName: 'nginx',
    ingressNamespace: 'ingress-nginx',
    domain: DOMAIN,
    complete,
    api: { endpoint: kube.url, caData: kube.caData },
    credentials: async () => CREDENTIALS,
    invokeWatcher: async (event) => {
      watchers.push(c.watch(event));
    },
    timing: { pollMs: 25, readyTimeoutMs: 20_000, teardownWaitMs: 10_000, namespaceWaitMs: 5_000 },
    ...over,
  });
  return c;
}

export async function ready(c: EksCluster, t: RuntimeTarget, apps: Record<string, AppSpec>) {
  const token = newToken();
  await c.awaitReady(t, apps, token);
  return outcomeOf(token);
}

/** Every object of a namespace as `resource/name@resourceVersion`. */
export function snapshot(ns: string): string[] {
  return ['secrets', 'deployments', 'services', 'ingresses', 'resourcequotas', 'networkpolicies']
    .flatMap((r) => kube.list(r, ns).map((o) => `${r}/${o.metadata.name}@${o.metadata.resourceVersion}`))
    .sort();
}
export const template = (ns: string, app: string) => kube.get('deployments', ns, app)?.spec.template;
/** Wait until `done()` holds (polling), at most `ms`. */
export async function until(done: () => boolean, ms = 10_000) {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
