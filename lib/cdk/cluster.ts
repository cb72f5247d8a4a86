import { Token } from 'aws-cdk-lib';
import { type RouteAccess, routeIds, routes } from '../../functions/manifest/routes.js';
import type { ClusterSettings, VerifierNetwork } from './access.js';

/*
 * The EKS cluster previews run on, as the stack's props give it: its settings (checked), and which
 * functions call it. Its Kubernetes API endpoint and CA, resolved at deploy time, are
 * constructs/cluster-api.ts's.
 */

/** The cluster and its ingress settings (props of StatelessStack). */
export interface ClusterOptions {
  /**
   * The EKS cluster previews run on: its name, in this stack's account and region. Its API endpoint must be
   * reachable from Lambda (public endpoint access: the functions are not in a VPC), and its authentication
   * mode API or API_AND_CONFIG_MAP for the access entries (else `eksAccessEntries: false`).
   * Unset, the stack deploys without a cluster: images build, and a deploy fails saying that no cluster is
   * configured (a teardown has nothing to remove); the ingress settings below must then be unset too.
   * @default - no cluster
   */
  eksClusterName?: string;
  /**
   * Create an EKS access entry (Kubernetes group `preview-runtime`) for each role that calls the cluster.
   * false: the operator maps those roles (the `…RoleArn` outputs) in the aws-auth ConfigMap instead, for a
   * cluster in CONFIG_MAP authentication mode (docs/deploy-to-aws.md).
   * @default true
   */
  eksAccessEntries?: boolean;
  /**
   * How visitors reach the apps (EKS_ROUTING): `gateway`, an HTTPRoute per app on the Gateway named by
   * `gatewayName`/`gatewayNamespace`; or `ingress`, an Ingress of `ingressClassName` (never protected).
   * @default 'gateway'
   */
  routing?: 'gateway' | 'ingress';
  /** The Gateway the HTTPRoutes attach to (EKS_GATEWAY_NAME). Required with Gateway routing. */
  gatewayName?: string;
  /** Its namespace (EKS_GATEWAY_NAMESPACE). Required with Gateway routing. */
  gatewayNamespace?: string;
  /** Its listener (EKS_GATEWAY_SECTION), when it has more than one. @default - none: every listener */
  gatewaySection?: string;
  /**
   * Who enforces protected previews (EKS_PROTECTION): `envoy-security-policy` (Envoy Gateway),
   * `gateway-external-auth` (the experimental ExternalAuth filter), or `none`: then `defaultAccess` must be
   * chosen, and protection is refused where asked for. Ingress routing allows `none` only.
   * @default 'envoy-security-policy' with Gateway routing; required to be none with Ingress routing
   */
  protection?: 'envoy-security-policy' | 'gateway-external-auth' | 'none';
  /**
   * The access of an application that set none (PREVIEW_DEFAULT_ACCESS). Required when `protection` is
   * `none`, and then only `public`: never silently public.
   * @default - protected (where protection is enforced)
   */
  defaultAccess?: 'protected' | 'public';
  /** `spec.ingressClassName` of every app's Ingress (EKS_INGRESS_CLASS). Required with Ingress routing. */
  ingressClassName?: string;
  /**
   * The wildcard domain apps answer under (EKS_INGRESS_DOMAIN), without `*.`: an app's URL is
   * `https://<app>-<namespace>.<ingressDomain>`, so `*.<ingressDomain>` must resolve to the ingress
   * controller and its certificate must cover it. Required with `eksClusterName`.
   * @default - none (required with a cluster)
   */
  ingressDomain?: string;
  /**
   * The namespace of the proxies that forward to the apps (EKS_INGRESS_NAMESPACE): each preview
   * namespace's NetworkPolicy admits traffic from it (and from the namespace's own pods, KEDA's when
   * asleep, and `allowFromCidrs`), nothing else.
   * @default - the Gateway's namespace (Gateway routing); none (Ingress routing)
   */
  ingressNamespace?: string;
  /**
   * Extra annotations on every Ingress (EKS_INGRESS_ANNOTATIONS, as JSON), e.g. an ALB's scheme, group and
   * certificate ARN. @default - none
   */
  ingressAnnotations?: Record<string, string>;
  /**
   * The TLS Secret named in every Ingress (EKS_TLS_SECRET_NAME). It must exist in each preview namespace,
   * which the runtime does not do; leave it unset to serve the controller's default (wildcard) certificate.
   * @default - none: the ingress controller's default certificate
   */
  tlsSecretName?: string;
  /**
   * CIDRs each preview namespace's NetworkPolicy also admits (EKS_ALLOW_FROM_CIDRS): an ALB in IP target
   * mode connects from the VPC's addresses, not from a pod of the ingress namespace. @default - none
   */
  allowFromCidrs?: string[];
  /**
   * preview.yaml's postgres services (docs/deploy-to-aws.md "Databases"): each CloudNativePG Cluster's
   * volume size (EKS_DB_STORAGE_SIZE) and storage class (EKS_DB_STORAGE_CLASS), and the namespace the
   * operator runs in (EKS_CNPG_NAMESPACE), which every preview's NetworkPolicy admits when it has one.
   * @default - 1Gi; the cluster's default storage class; cnpg-system
   */
  dbStorageSize?: string;
  dbStorageClass?: string;
  cnpgNamespace?: string;
  /**
   * The cluster's VPC (verifierVpcId), two or more of its subnets in different zones (verifierSubnetIds)
   * and the security group the Gateway's proxies connect from (clusterSecurityGroupId: the EKS cluster
   * security group, which nodes and pods use unless given their own). Given, the access verifier gets an
   * internal Application Load Balancer there, which routes by no Host, and the cluster reaches the
   * verifier through it (ACCESS_VERIFIER_URL `http://<its DNS name>`); a Gateway's external auth sends
   * the visitor's Host, which a function URL cannot serve. All three or none.
   * @default - none: the verifier's function URL only (protection on a Gateway does not reach it)
   */
  verifierVpcId?: string;
  verifierSubnetIds?: string[];
  clusterSecurityGroupId?: string;
}

/** EKS cluster names: 1-100 characters, alphanumeric first, then alphanumerics, `-` and `_`. */
const clusterNamePattern = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;
/** A DNS name of lower-case labels (no wildcard, no trailing dot). */
const domainPattern =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;
/** A Kubernetes object name (DNS subdomain, RFC 1123). */
const subdomainPattern = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A Kubernetes namespace name (DNS label, RFC 1123). */
const labelPattern = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const ipv4Cidr = /^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)\/(3[0-2]|[12]?\d)$/;
const maxAnnotationsJson = 1024;
const ipv6Cidr = /^[0-9a-fA-F:]*:[0-9a-fA-F:.]*\/(12[0-8]|1[01]\d|[1-9]?\d)$/;

/**
 * The step entries whose functions call the cluster's API (deploy, restart, prune; teardown; a failed
 * environment's apps stopped): with the
 * workers, the only roles granted eks:DescribeCluster and an access entry. They are the steps whose
 * manifest entry declares `runtime` (the cluster's settings), which an infra test holds them to.
 */
export const clusterStepEntries = [
  'functions/steps/deploy-apps.ts',
  'functions/steps/tear-down.ts',
  'functions/steps/mark-failed.ts',
];
/** The routes that call the cluster's API: those with `logs` access (an app's pods' logs). */
export const clusterRouteIds = routeIds.filter((id) => (routes[id].access as RouteAccess).logs);

/**
 * The cluster settings from the stack props (defaults applied, each value checked), or undefined without
 * a cluster. Tokens (deploy-time values) are not checked.
 */
export function clusterSettings(props: ClusterOptions): ClusterSettings | undefined {
  const check = (name: string, value: string | undefined, pattern: RegExp, what: string) => {
    if (value !== undefined && !Token.isUnresolved(value) && !pattern.test(value))
      throw new Error(`${name} must be ${what} (got "${value}")`);
  };
  const name = props.eksClusterName;
  if (name === undefined) {
    const set = (
      [
        'eksAccessEntries',
        'routing',
        'gatewayName',
        'gatewayNamespace',
        'gatewaySection',
        'protection',
        'defaultAccess',
        'ingressClassName',
        'ingressDomain',
        'ingressNamespace',
        'ingressAnnotations',
        'tlsSecretName',
        'allowFromCidrs',
        'dbStorageSize',
        'dbStorageClass',
        'cnpgNamespace',
        'verifierVpcId',
        'verifierSubnetIds',
        'clusterSecurityGroupId',
      ] as const
    ).filter((key) => props[key] !== undefined);
    if (set.length > 0) throw new Error(`${set.join(', ')} set without eksClusterName`);
    return undefined;
  }
  check('eksClusterName', name, clusterNamePattern, 'an EKS cluster name');
  const domain = props.ingressDomain;
  if (domain === undefined) throw new Error('ingressDomain is required with eksClusterName');
  if (!Token.isUnresolved(domain) && domain.startsWith('*.'))
    throw new Error(`ingressDomain is the domain under the wildcard, without "*." (got "${domain}")`);
  check('ingressDomain', domain, domainPattern, 'a lower-case DNS name (previews.example.com)');
  const routing = props.routing ?? 'gateway';
  if (routing !== 'gateway' && routing !== 'ingress')
    throw new Error(`routing must be gateway or ingress (got "${routing}")`);
  const ingressClassName = props.ingressClassName;
  if (routing === 'ingress' && ingressClassName === undefined)
    throw new Error('ingressClassName is required with routing=ingress (the ALB Ingress: alb)');
  check('ingressClassName', ingressClassName, subdomainPattern, 'a Kubernetes object name');
  if (routing === 'gateway' && (props.gatewayName === undefined || props.gatewayNamespace === undefined))
    throw new Error(
      'gatewayName and gatewayNamespace are required with routing=gateway (the Gateway the previews attach to)',
    );
  check('gatewayName', props.gatewayName, subdomainPattern, 'a Kubernetes object name');
  check('gatewayNamespace', props.gatewayNamespace, labelPattern, 'a Kubernetes namespace name');
  check('gatewaySection', props.gatewaySection, labelPattern, "a listener's name");
  const protection = props.protection ?? (routing === 'gateway' ? 'envoy-security-policy' : undefined);
  if (protection === undefined)
    throw new Error(
      'protection must be set to none with routing=ingress (no maintained Ingress controller asks the verifier): then choose defaultAccess=public',
    );
  if (!['envoy-security-policy', 'gateway-external-auth', 'none'].includes(protection))
    throw new Error(
      `protection must be envoy-security-policy, gateway-external-auth or none (got "${protection}")`,
    );
  if (routing === 'ingress' && protection !== 'none')
    throw new Error(`protection ${protection} needs routing=gateway: with routing=ingress it must be none`);
  const defaultAccess = props.defaultAccess;
  if (defaultAccess !== undefined && defaultAccess !== 'protected' && defaultAccess !== 'public')
    throw new Error(`defaultAccess must be protected or public (got "${defaultAccess}")`);
  if (protection === 'none' && defaultAccess !== 'public')
    throw new Error(
      defaultAccess === 'protected'
        ? 'defaultAccess=protected cannot be enforced with protection=none: choose defaultAccess=public, or a protection'
        : "protection=none: choose the previews' default access explicitly (defaultAccess=public); previews are never made public silently",
    );
  const ingressNamespace =
    props.ingressNamespace ?? (routing === 'gateway' ? props.gatewayNamespace : undefined);
  check('ingressNamespace', ingressNamespace, labelPattern, 'a Kubernetes namespace name');
  check('tlsSecretName', props.tlsSecretName, subdomainPattern, 'a Kubernetes object name');
  for (const [key, value] of Object.entries(props.ingressAnnotations ?? {})) {
    if (typeof value !== 'string') throw new Error(`ingressAnnotations.${key} must be a string`);
  }
  // A function's whole environment must fit Lambda's 4 KB; the annotations may take a quarter of it.
  const annotationsJson = JSON.stringify(props.ingressAnnotations ?? {});
  if (!Token.isUnresolved(annotationsJson) && annotationsJson.length > maxAnnotationsJson)
    throw new Error(
      `ingressAnnotations: at most ${maxAnnotationsJson} characters of JSON (Lambda's environment is 4 KB)`,
    );
  for (const cidr of props.allowFromCidrs ?? []) {
    if (!Token.isUnresolved(cidr) && !ipv4Cidr.test(cidr) && !ipv6Cidr.test(cidr))
      throw new Error(`allowFromCidrs: "${cidr}" is not a CIDR block (10.0.0.0/16)`);
  }
  check('dbStorageSize', props.dbStorageSize, /^[1-9][0-9]*(Mi|Gi|Ti)$/, 'a volume size (1Gi, 512Mi)');
  check('dbStorageClass', props.dbStorageClass, subdomainPattern, 'a StorageClass name');
  check('cnpgNamespace', props.cnpgNamespace, labelPattern, 'a Kubernetes namespace name');
  const verifierNetwork = verifierNetworkOf(props, protection);
  return {
    name,
    accessEntries: props.eksAccessEntries ?? true,
    routing,
    gatewayName: props.gatewayName,
    gatewayNamespace: props.gatewayNamespace,
    gatewaySection: props.gatewaySection,
    protection,
    defaultAccess,
    ingressClassName,
    ingressDomain: domain,
    ingressNamespace,
    ingressAnnotations: props.ingressAnnotations,
    tlsSecretName: props.tlsSecretName,
    allowFromCidrs: props.allowFromCidrs,
    dbStorageSize: props.dbStorageSize,
    dbStorageClass: props.dbStorageClass,
    cnpgNamespace: props.cnpgNamespace,
    ...(verifierNetwork ? { verifierNetwork } : {}),
  };
}

/** The verifier's network from the props: all three keys or none, each checked; only with a protection. */
function verifierNetworkOf(props: ClusterOptions, protection: string): VerifierNetwork | undefined {
  const { verifierVpcId: vpcId, verifierSubnetIds: subnetIds, clusterSecurityGroupId } = props;
  const given = [vpcId, subnetIds, clusterSecurityGroupId].filter((v) => v !== undefined).length;
  if (given === 0) return undefined;
  if (given < 3)
    throw new Error(
      'verifierVpcId, verifierSubnetIds and clusterSecurityGroupId go together (the verifier’s internal load balancer)',
    );
  if (protection === 'none')
    throw new Error(
      'verifierVpcId, verifierSubnetIds and clusterSecurityGroupId need a protection (not none)',
    );
  const known = (v: string) => !Token.isUnresolved(v);
  if (known(vpcId!) && !/^vpc-[0-9a-f]{8,17}$/.test(vpcId!))
    throw new Error(`verifierVpcId must be a VPC id (vpc-…) (got "${vpcId}")`);
  for (const id of subnetIds!)
    if (known(id) && !/^subnet-[0-9a-f]{8,17}$/.test(id))
      throw new Error(`verifierSubnetIds: "${id}" is not a subnet id (subnet-…)`);
  if (subnetIds!.length < 2)
    throw new Error('verifierSubnetIds: at least two subnets, in different zones (an ALB needs two)');
  if (known(clusterSecurityGroupId!) && !/^sg-[0-9a-f]{8,17}$/.test(clusterSecurityGroupId!))
    throw new Error(
      `clusterSecurityGroupId must be a security group id (sg-…) (got "${clusterSecurityGroupId}")`,
    );
  return { vpcId: vpcId!, subnetIds: subnetIds!, clusterSecurityGroupId: clusterSecurityGroupId! };
}
