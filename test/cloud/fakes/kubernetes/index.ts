/**
 * A loopback fake of the Kubernetes API server, for the EKS runtime's tests and the cloud simulation tier.
 * Test support code, not product. The real `@kubernetes/client-node` talks to it over HTTPS (client-node
 * refuses plain http unless TLS verification is switched off, which the product never does): a self-signed
 * certificate for 127.0.0.1 is made with `openssl` once per process, and `caData` is the CA the fake
 * `eks:DescribeCluster` hands out (../kubernetes-aws.ts).
 *
 * What it implements, and only that:
 * - Resources: namespaces (cluster-scoped); configmaps, secrets, services, resourcequotas, pods (core/v1);
 *   deployments (apps/v1); ingresses, networkpolicies (networking.k8s.io/v1); the optional engines' custom
 *   kinds (crds.ts: KEDA's, its HTTP add-on's, the Gateway API's, Envoy Gateway's; each a 404 when
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
 *
 * The files: server.ts (the HTTPS server, routing, what tests stage and assert with), store.ts (the
 * objects and the verbs on them), controller.ts (namespaces, Jobs, CloudNativePG Clusters) and
 * workloads.ts (Deployments and their pods), protocol.ts (resources, errors, patches, selectors), auth.ts
 * (TLS and EKS tokens), crds.ts (the custom kinds and their CRDs' checks).
 */

export { loopbackCertificate, type TokenCheck, tokenProblem } from './auth.js';
export { type FaultReason, mergePatch } from './protocol.js';
export { FakeKubernetes, type FakeKubernetesOptions } from './server.js';
