/**
 * What the fake Kubernetes API (index.ts has the story) and its controller share: the resources it serves,
 * its errors as the real server writes them (`Status` bodies), the patch formats and the label selectors
 * it understands. Test support code, not product.
 */
import { CRD_RESOURCES } from './crds.js';

export type Obj = Record<string, any>;

export type FaultReason =
  | 'CrashLoopBackOff'
  | 'ImagePullBackOff'
  | 'ErrImagePull'
  | 'CreateContainerConfigError'
  | 'ProgressDeadlineExceeded';

export interface ResourceDef {
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
export const RESOURCES: Record<string, ResourceDef> = {
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
  // The optional engines' kinds (crds.ts): their CRDs' required fields are checked.
  ...CRD_RESOURCES,
};

export class ApiError extends Error {
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

export const clone = <T>(o: T): T => (o === undefined ? o : JSON.parse(JSON.stringify(o)));
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** A failure injected into an app's pods (`FakeKubernetes.inject`), or one its own spec causes. */
export interface Fault {
  reason: FaultReason;
  message?: string;
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
export function jsonPatch(target: Obj, ops: unknown): Obj {
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

export function selectorMatcher(
  selector: string | null,
): (labels: Record<string, string> | undefined) => boolean {
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
