import { describe, expect, test } from '@jest/globals';
import { type ScheduleId, schedules } from '../../functions/manifest/events.js';
import type { RouteAccess } from '../../functions/manifest/routes.js';
import { type TaskDef, workflows } from '../../functions/manifest/workflows.js';
import { eksClusterOf } from '../../functions/ports/runtime/eks/cluster.js';
import { parseConfig } from '../../functions/shared/config.js';
import { clusterDescribeActions, clusterGroup } from '../../lib/cdk/access.js';
import { clusterRouteIds, clusterStepEntries } from '../../lib/cdk/cluster.js';
import {
  built,
  clusterApiId,
  clusterArn,
  eksEnvOf,
  eksStatementsOf,
  envOf,
  gateway,
  roleOf,
  stacks,
  watcherId,
  workerIds,
  workflowNames,
} from './cluster-stack.js';
import {
  asArray,
  clusterContext,
  type Json,
  logicalIdOf,
  mentions,
  resourcesOf,
  type Synthesized,
  statementsOf,
  stepAccess,
  synthesize,
} from './synth.js';

// The cluster's settings reaching the functions, each function's environment within Lambda's 4 KB, who may
// call the cluster and how, and the app-logs route; the rollout watcher: cluster-watcher.test.ts.
const { none, full, minimal, awsAuth } = stacks;

describe('cluster settings reach every runtime function as the EKS_* variables', () => {
  test.each(built(full))(
    '%s: all of them, exactly when it declares runtime or calls the cluster',
    (_, fn) => {
      const expected =
        fn.runtime || fn.callsCluster
          ? {
              EKS_CLUSTER_NAME: 'previews',
              EKS_ROUTING: 'ingress',
              EKS_PROTECTION: 'none',
              PREVIEW_DEFAULT_ACCESS: 'public',
              EKS_INGRESS_CLASS: 'alb',
              EKS_INGRESS_DOMAIN: 'previews.example.com',
              EKS_INGRESS_NAMESPACE: 'kube-system',
              EKS_INGRESS_ANNOTATIONS: clusterContext.ingressAnnotations,
              EKS_TLS_SECRET_NAME: 'previews-wildcard',
              EKS_ALLOW_FROM_CIDRS: '10.0.0.0/16,10.1.0.0/16',
            }
          : {};
      expect(eksEnvOf(full, fn.id)).toEqual(expected);
    },
  );

  test.each(built(minimal))(
    '%s: the defaults (Gateway routing, Envoy Gateway protection), nothing of ingress-nginx',
    (_, fn) => {
      expect(eksEnvOf(minimal, fn.id)).toEqual(
        fn.runtime || fn.callsCluster
          ? {
              EKS_CLUSTER_NAME: 'previews',
              EKS_ROUTING: 'gateway',
              EKS_GATEWAY_NAME: 'previews',
              EKS_GATEWAY_NAMESPACE: 'envoy-gateway-system',
              EKS_PROTECTION: 'envoy-security-policy',
              EKS_INGRESS_DOMAIN: 'previews.example.com',
              EKS_INGRESS_NAMESPACE: 'envoy-gateway-system',
            }
          : {},
      );
    },
  );

  test('each routing and protection key reaches the functions as the configuration reads it', () => {
    const s = synthesize({
      eksClusterName: 'previews',
      ingressDomain: 'previews.example.com',
      ...gateway,
      gatewaySection: 'https',
      protection: 'gateway-external-auth',
      defaultAccess: 'protected',
    });
    const env = envOf(s, watcherId(s));
    expect(eksEnvOf(s, watcherId(s))).toMatchObject({
      EKS_GATEWAY_SECTION: 'https',
      EKS_PROTECTION: 'gateway-external-auth',
      PREVIEW_DEFAULT_ACCESS: 'protected',
    });
    const strings = Object.fromEntries(
      Object.entries(env).map(([k, v]) => [
        k,
        typeof v === 'string'
          ? v
          : k === 'EKS_CLUSTER_ENDPOINT'
            ? 'https://resolved.eks.example'
            : `resolved:${k}`,
      ]),
    );
    expect(parseConfig({ ...strings, AWS_REGION: 'eu-west-1' }).eks).toMatchObject({
      routing: 'gateway',
      gatewayName: 'previews',
      gatewayNamespace: 'envoy-gateway-system',
      gatewaySection: 'https',
      protection: 'gateway-external-auth',
      defaultAccess: 'protected',
    });
    // With protection none, the choice made explicitly reaches the functions.
    const open = synthesize({
      eksClusterName: 'previews',
      ingressDomain: 'previews.example.com',
      ...gateway,
      protection: 'none',
      defaultAccess: 'public',
    });
    expect(eksEnvOf(open, watcherId(open))).toMatchObject({
      EKS_PROTECTION: 'none',
      PREVIEW_DEFAULT_ACCESS: 'public',
    });
  });

  test.each(built(none))('%s: none without a cluster (a deploy then fails saying so)', (_, fn) => {
    expect(eksEnvOf(none, fn.id)).toEqual({});
    // Without EKS_CLUSTER_NAME the cloud runtime has no cluster: config.ts reads no cluster name.
    const env = Object.fromEntries(
      Object.entries(envOf(none, fn.id)).map(([k, v]) => [k, typeof v === 'string' ? v : `resolved:${k}`]),
    );
    expect(parseConfig({ ...env, AWS_REGION: 'eu-west-1' }).eks.clusterName).toBeUndefined();
  });

  test.each(built(full).filter(([, fn]) => fn.runtime))(
    '%s: its environment builds the EKS cluster adapter (eksClusterOf) with the apps’ https host',
    (_, fn) => {
      // Prepare: deploy-time references become placeholder strings (the cluster endpoint an https URL, as
      // DescribeCluster answers it); Lambda sets AWS_REGION and its name.
      const placeholder = (k: string) =>
        k === 'EKS_CLUSTER_ENDPOINT' ? 'https://resolved.eks.example' : `resolved:${k}`;
      const env = Object.fromEntries(
        Object.entries(envOf(full, fn.id)).map(([k, v]) => [k, typeof v === 'string' ? v : placeholder(k)]),
      );
      const lambdaEnv = { ...env, AWS_REGION: 'eu-west-1', AWS_LAMBDA_FUNCTION_NAME: 'this-function' };
      // Act
      const config = parseConfig(lambdaEnv);
      const cluster = eksClusterOf({ complete: async () => undefined }, config);
      // Assess
      expect(config.eks.clusterName).toBe('previews');
      expect(config.eks.watcherFunction).toBe(
        fn.invokesWatcher && !fn.isWatcher ? 'resolved:ROLLOUT_WATCHER_FUNCTION' : undefined,
      );
      const target = { orgId: 'org', repoFullName: 'acme/shop', prNumber: 7 };
      expect(cluster.urlOf(target, 'web')).toBe(
        `https://web-${cluster.namespaceOf(target)}.previews.example.com`,
      );
    },
  );
});

/**
 * Lambda refuses a function whose environment (names and values) is over 4 KB. The cluster's CA, resolved
 * at deploy time, is the largest value; the template only holds references, so each unresolved value is
 * counted at a generous size: the CA as 2,000 characters (EKS issues an RSA-2048 CA: about 1,500 as
 * base64 PEM), the endpoint as 100, any other reference (CloudFormation-generated table names, ARNs) as
 * 100 (this stack's are about 60). The user-given settings (ingress annotations, CIDRs) count as given:
 * docs/deploy-to-aws.md says what room is left for them.
 */
const ENV_LIMIT_BYTES = 4096;
const countedLength = (name: string, value: Json): number => {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (name === 'EKS_CLUSTER_CA_DATA') return 2000;
  return 100;
};

test.each(built(full))("%s: its environment fits Lambda's 4 KB, counting the CA generously", (_, fn) => {
  const env = envOf(full, fn.id);
  const bytes = Object.entries(env).reduce((n, [k, v]) => n + Buffer.byteLength(k) + countedLength(k, v), 0);
  expect({ fn: fn.id, fits: bytes <= ENV_LIMIT_BYTES, bytes }).toMatchObject({ fn: fn.id, fits: true });
});

describe('cluster access', () => {
  test('the steps that call the cluster are exactly the runtime steps of the workflow manifest', () => {
    for (const entry of clusterStepEntries) {
      const declared = workflowNames.flatMap((w) =>
        Object.values(workflows[w].tasks as Record<string, TaskDef>).filter((t) => t.entry === entry),
      );
      expect({ entry, runtime: declared.length > 0 && declared.every((t) => t.access.runtime) }).toEqual({
        entry,
        runtime: true,
      });
    }
    const runtimeSteps = [...full.stateless.stepFunctions.keys()].filter((e) => stepAccess(e).runtime);
    expect(runtimeSteps.sort()).toEqual([...clusterStepEntries].sort());
  });

  test.each(built(full))(
    '%s gets the cluster API (endpoint and CA, resolved by the stack) exactly when it calls it, and no EKS action',
    (_, fn) => {
      expect(eksStatementsOf(full, fn.id)).toEqual([]);
      const env = envOf(full, fn.id);
      if (!fn.callsCluster) {
        expect(env.EKS_CLUSTER_ENDPOINT).toBeUndefined();
        expect(env.EKS_CLUSTER_CA_DATA).toBeUndefined();
        return;
      }
      const api = clusterApiId(full);
      expect(env.EKS_CLUSTER_ENDPOINT).toEqual({ 'Fn::GetAtt': [api, 'cluster.endpoint'] });
      expect(env.EKS_CLUSTER_CA_DATA).toEqual({ 'Fn::GetAtt': [api, 'cluster.certificateAuthority.data'] });
    },
  );

  test('the stack resolves the cluster API at deploy time: eks:DescribeCluster of that cluster only', () => {
    const calls = Object.values(resourcesOf(full.statelessTemplate, 'Custom::AWS'));
    expect(calls).toHaveLength(1);
    const create = JSON.parse(JSON.stringify(calls[0]!.Properties.Create));
    expect(JSON.stringify(create)).toContain('\\"action\\":\\"DescribeCluster\\"');
    expect(JSON.stringify(create)).toMatch(/\\"service\\":\\"(EKS|eks|@aws-sdk\/client-eks)\\"/);
    expect(JSON.stringify(create)).toContain('\\"name\\":\\"previews\\"');
    const policies = Object.values(resourcesOf(full.statelessTemplate, 'AWS::IAM::Policy'));
    const describe = policies
      .flatMap((p) => asArray(p.Properties.PolicyDocument.Statement))
      .filter((st: Json) => asArray(st.Action).some((a: string) => a.startsWith('eks:')));
    expect(describe).toHaveLength(1);
    expect(asArray(describe[0].Action)).toEqual(clusterDescribeActions);
    expect(describe[0].Resource).toEqual(clusterArn);
    expect(clusterDescribeActions).toEqual(['eks:DescribeCluster']);
    expect(resourcesOf(none.statelessTemplate, 'Custom::AWS')).toEqual({});
  });

  test('without a cluster nothing may call EKS', () => {
    for (const [, fn] of built(none)) expect(eksStatementsOf(none, fn.id)).toEqual([]);
  });

  test('an access entry per role that calls the cluster: STANDARD, group preview-runtime, no access policy', () => {
    const entries = Object.values(resourcesOf(full.statelessTemplate, 'AWS::EKS::AccessEntry')).map(
      (e) => e.Properties,
    );
    const callers = built(full).filter(([, fn]) => fn.callsCluster);
    expect(callers.map(([label]) => label).sort()).toEqual(
      [
        ...clusterStepEntries.map((e) => `step ${e}`),
        ...clusterRouteIds.map((r) => `route ${r}`),
        ...workerIds.map((w) => `worker ${w}`),
        // The expiry sweep: stale teardown fences.
        ...(Object.keys(schedules) as ScheduleId[])
          .filter((id) => (schedules[id].target.access as RouteAccess).runtime)
          .map((id) => `schedule target ${id}`),
      ].sort(),
    );
    expect(callers.map(([label]) => label)).toContain('schedule target expirySweep');
    expect(entries).toHaveLength(callers.length);
    for (const [, fn] of callers) {
      const roleId = roleOf(full, fn.id);
      const own = entries.filter((e) => mentions(e.PrincipalArn, roleId));
      expect(own).toEqual([
        {
          ClusterName: 'previews',
          PrincipalArn: { 'Fn::GetAtt': [roleId, 'Arn'] },
          Type: 'STANDARD',
          KubernetesGroups: [clusterGroup],
          Tags: expect.any(Array),
        },
      ]);
    }
    expect(clusterGroup).toBe('preview-runtime');
  });

  test('none without a cluster, none when the roles are mapped in aws-auth (the cluster API still given)', () => {
    expect(resourcesOf(none.statelessTemplate, 'AWS::EKS::AccessEntry')).toEqual({});
    expect(resourcesOf(awsAuth.statelessTemplate, 'AWS::EKS::AccessEntry')).toEqual({});
    for (const [, fn] of built(awsAuth).filter(([, f]) => f.callsCluster)) {
      expect(eksStatementsOf(awsAuth, fn.id)).toEqual([]);
      expect(envOf(awsAuth, fn.id).EKS_CLUSTER_ENDPOINT).toEqual({
        'Fn::GetAtt': [clusterApiId(awsAuth), 'cluster.endpoint'],
      });
    }
  });

  test('outputs the ARN of each role that calls the cluster (what aws-auth maps), with or without one', () => {
    for (const s of [none, full]) {
      const values = Object.values(s.statelessTemplate.toJSON().Outputs as Record<string, Json>).map(
        (o) => o.Value,
      );
      for (const [, fn] of built(s).filter(([, f]) => f.callsCluster)) {
        expect(values).toContainEqual({ 'Fn::GetAtt': [roleOf(s, fn.id), 'Arn'] });
      }
    }
  });

  test('no account or region is written into the template', () => {
    const text = JSON.stringify(full.statelessTemplate.toJSON());
    expect(text).not.toMatch(/:\d{12}:/);
    expect(text).not.toMatch(/(us|eu|ap|sa|ca|me|af)-(east|west|north|south|central|northeast|southeast)-\d/);
  });

  test.each([
    [{ eksClusterName: 'previews' }, /ingressDomain is required/],
    [
      { eksClusterName: 'previews', ingressDomain: 'previews.example.com' },
      /gatewayName and gatewayNamespace are required with routing=gateway/,
    ],
    [{ ...clusterContext, routing: 'nginx' }, /routing must be gateway or ingress/],
    [{ ...clusterContext, ingressClassName: undefined }, /ingressClassName is required with routing=ingress/],
    [{ ...clusterContext, protection: undefined }, /protection must be set to none with routing=ingress/],
    [{ ...clusterContext, protection: 'envoy-security-policy' }, /needs routing=gateway/],
    [
      { ...clusterContext, defaultAccess: undefined },
      /choose the previews' default access explicitly \(defaultAccess=public\)/,
    ],
    [
      { ...clusterContext, defaultAccess: 'protected' },
      /defaultAccess=protected cannot be enforced with protection=none/,
    ],
    [
      { eksClusterName: 'previews', ingressDomain: 'previews.example.com', ...gateway, protection: 'maybe' },
      /protection must be envoy-security-policy, gateway-external-auth or none/,
    ],
    [
      { eksClusterName: 'previews', ingressDomain: 'previews.example.com', ...gateway, protection: 'none' },
      /defaultAccess=public/,
    ],
    [
      {
        eksClusterName: 'previews',
        ingressDomain: 'previews.example.com',
        ...gateway,
        gatewayNamespace: 'Envoy',
      },
      /gatewayNamespace/,
    ],
    [{ ...clusterContext, defaultAccess: 'maybe' }, /defaultAccess must be protected or public/],
    [{ eksClusterName: 'previews', ingressDomain: '*.previews.example.com' }, /without "\*\."/],
    [{ eksClusterName: 'previews', ingressDomain: 'Previews.Example.com' }, /lower-case DNS name/],
    [{ eksClusterName: 'previews', ingressDomain: 'localhost' }, /lower-case DNS name/],
    [{ eksClusterName: 'bad name', ingressDomain: 'previews.example.com' }, /EKS cluster name/],
    [{ ...clusterContext, ingressNamespace: 'Ingress' }, /namespace name/],
    [{ ...clusterContext, ingressClassName: 'ALB' }, /ingressClassName/],
    [{ ...clusterContext, tlsSecretName: 'x_y' }, /tlsSecretName/],
    [{ ...clusterContext, allowFromCidrs: '10.0.0.0' }, /not a CIDR block/],
    [{ ...clusterContext, ingressAnnotations: '{"a":' }, /JSON object of strings/],
    [{ ...clusterContext, ingressAnnotations: '{"a":1}' }, /JSON object of strings/],
    [{ ...clusterContext, ingressAnnotations: '["a"]' }, /JSON object of strings/],
    [{ ...clusterContext, ingressAnnotations: JSON.stringify({ a: 'x'.repeat(1100) }) }, /4 KB/],
    [{ ...clusterContext, eksAccessEntries: 'no' }, /eksAccessEntries/],
    [{ ingressDomain: 'previews.example.com' }, /ingressDomain set without eksClusterName/],
    [{ gatewayName: 'previews' }, /gatewayName set without eksClusterName/],
    [{ ...clusterContext, dbStorageSize: '10GB' }, /dbStorageSize/],
    [{ ...clusterContext, dbStorageClass: 'GP3' }, /dbStorageClass/],
    [{ ...clusterContext, cnpgNamespace: 'CNPG' }, /cnpgNamespace/],
    [{ dbStorageSize: '5Gi' }, /dbStorageSize set without eksClusterName/],
  ])('rejects %j', (context, message) => {
    expect(() => synthesize(context)).toThrow(message);
  });

  test('accepts IPv6 CIDRs and annotations as an object (cdk.json)', () => {
    const s = synthesize({
      ...clusterContext,
      allowFromCidrs: ['10.0.0.0/8', 'fd00::/8'],
      ingressAnnotations: { 'alb.ingress.kubernetes.io/scheme': 'internal' },
    });
    const env = envOf(s, watcherId(s));
    expect(env.EKS_ALLOW_FROM_CIDRS).toBe('10.0.0.0/8,fd00::/8');
    expect(JSON.parse(env.EKS_INGRESS_ANNOTATIONS)).toEqual({
      'alb.ingress.kubernetes.io/scheme': 'internal',
    });
  });

  test("the services' settings reach the runtime functions", () => {
    const s = synthesize({
      ...clusterContext,
      dbStorageSize: '5Gi',
      dbStorageClass: 'gp3',
      cnpgNamespace: 'postgres-operator',
    });
    const env = envOf(s, watcherId(s));
    expect([env.EKS_DB_STORAGE_SIZE, env.EKS_DB_STORAGE_CLASS, env.EKS_CNPG_NAMESPACE]).toEqual([
      '5Gi',
      'gp3',
      'postgres-operator',
    ]);
  });
});

describe('the app-logs route (logs access)', () => {
  const logsId = (s: Synthesized) => logicalIdOf(s.stateless.routeFunctions.getAppLogs);

  test('reads the image-build log (GetLogEvents only) and may start, change or read no build or image', () => {
    const statements = statementsOf(full.statelessTemplate, logsId(full));
    const actions = statements.flatMap((st) => st.actions);
    expect(actions).toContain('logs:GetLogEvents');
    expect(actions).not.toContain('logs:FilterLogEvents');
    for (const action of actions) expect(action).not.toMatch(/^(codebuild|ecr|states|s3):/);
    const logGroup = logicalIdOf(full.stateless.imageBuild.logGroup);
    const logRead = statements.filter((st) => st.actions.includes('logs:GetLogEvents'));
    expect(logRead).toHaveLength(1);
    expect(logRead[0]!.actions).toEqual(['logs:GetLogEvents']);
    for (const resource of logRead[0]!.resources) expect(mentions(resource, logGroup)).toBe(true);
  });

  test('gets the build log group and the cluster (its API, an access entry), nothing else of the image builds', () => {
    const env = envOf(full, logsId(full));
    for (const name of [
      'IMAGE_BUILD_LOG_GROUP',
      'EKS_CLUSTER_NAME',
      'EKS_INGRESS_DOMAIN',
      'EKS_CLUSTER_ENDPOINT',
      'EKS_CLUSTER_CA_DATA',
    ])
      expect(env[name]).toBeDefined();
    // What the logs getter never reads stays out of the 4 KB the CA leaves little of.
    for (const name of ['IMAGE_BUILD_PROJECT', 'IMAGE_REPOSITORY_URI', 'ARTIFACTS_BUCKET'])
      expect(env[name]).toBeUndefined();
    expect(clusterRouteIds).toEqual(['getAppLogs']);
    expect(eksStatementsOf(full, logsId(full))).toEqual([]);
    // Without a cluster: no EKS settings, no EKS grant (its log reads answer only builds).
    expect(envOf(none, logsId(none)).EKS_CLUSTER_NAME).toBeUndefined();
    expect(eksStatementsOf(none, logsId(none))).toEqual([]);
  });
});
