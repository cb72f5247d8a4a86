/**
 * The fake Kubernetes API's objects (index.ts has the story) and the verbs on them, as the real API server
 * answers them: validation (names, labels, a Deployment's selector, Ingress hosts, the CRDs' checks of
 * crds.ts), server-set fields, optimistic concurrency, status as a subresource, namespaces that terminate.
 * Each verb throws the `ApiError` the server would answer. Test support code, not product.
 */
import { randomUUID } from 'node:crypto';
import { type CrdCheckOptions, crdProblems } from './crds.js';
import {
  ApiError,
  clone,
  DNS_LABEL,
  DNS_SUBDOMAIN,
  jsonPatch,
  LABEL_NAME,
  mergePatch,
  type Obj,
  RESOURCES,
  selectorMatcher,
} from './protocol.js';

export class ObjectStore {
  /** `<resource>/<namespace>/<name>` → the stored object (namespaces: `namespaces//<name>`). */
  readonly objects = new Map<string, Obj>();
  /** The last resourceVersion handed out: one counter for every write. */
  rv = 1000;
  /** Namespace → ticks it has been terminating (the controller removes it: controller.ts). */
  readonly terminating = new Map<string, number>();
  /** `<namespace>/<pod>` → the pod's log lines. */
  readonly podLogs = new Map<string, string[]>();

  constructor(private readonly gatewayChannel?: CrdCheckOptions['gatewayChannel']) {}

  /** A stored object (a copy). */
  get(resource: string, namespace: string, name: string): Obj | undefined {
    return clone(this.objects.get(this.key(resource, namespace, name)));
  }
  /** Stored objects of a resource in a namespace (copies). */
  list(resource: string, namespace = ''): Obj[] {
    const prefix = `${resource}/${namespace}/`;
    return [...this.objects.entries()].filter(([k]) => k.startsWith(prefix)).map(([, v]) => clone(v));
  }

  key(resource: string, namespace: string, name: string): string {
    return `${resource}/${namespace}/${name}`;
  }
  all(resource: string): Obj[] {
    return [...this.objects.entries()].filter(([k]) => k.startsWith(`${resource}/`)).map(([, v]) => v);
  }
  nextRv(): string {
    this.rv += 1;
    return String(this.rv);
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
  stored(resource: string, ns: string, name: string): Obj {
    const o = this.objects.get(this.key(resource, ns, name));
    if (!o) throw this.notFound(resource, name);
    return o;
  }

  read(resource: string, ns: string, name: string): Obj {
    return clone(this.stored(resource, ns, name));
  }

  listing(resource: string, ns: string, selector: string | null): Obj {
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
      causes.push(...crdProblems(resource, o, { gatewayChannel: this.gatewayChannel }));
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

  create(resource: string, ns: string, body: Obj): Obj {
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

  replace(resource: string, ns: string, name: string, body: Obj): Obj {
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

  patch(resource: string, ns: string, name: string, body: unknown, contentType: string): Obj {
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

  remove(resource: string, ns: string, name: string, options: Obj, query: URLSearchParams): Obj {
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
}
