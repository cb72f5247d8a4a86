import { describe, expect, test } from '@jest/globals';
import {
  clusterContext,
  type Json,
  logicalIdOf,
  resourcesOf,
  statementsOf,
  synthesize,
  verifierNetworkContext,
} from './synth.js';

// The access verifier of protected previews (lib/cdk/constructs/access-verifier.ts): with a
// cluster only, behind an anonymous function URL, reading the applications' access keys and nothing else.
const none = synthesize();
const full = synthesize(clusterContext);

describe('access verifier', () => {
  test('absent without a cluster', () => {
    expect(none.stateless.accessVerifier).toBeUndefined();
    expect(Object.keys(resourcesOf(none.statelessTemplate, 'AWS::Lambda::Url'))).toEqual([]);
  });

  test('its grants: GetSecretValue of <prefix>/*/_access-?????? only', () => {
    const verifier = full.stateless.accessVerifier!;
    const id = logicalIdOf(verifier.function);
    const statements = statementsOf(full.statelessTemplate, id);
    const resolved = full.stateless.resolve(statements) as { actions: string[]; resources: Json[] }[];
    const secretGrants = resolved.filter((s) => s.actions.some((a) => a.startsWith('secretsmanager:')));
    expect(secretGrants).toHaveLength(1);
    expect(secretGrants[0]!.actions).toEqual(['secretsmanager:GetSecretValue']);
    expect(JSON.stringify(secretGrants[0]!.resources)).toMatch(
      /:secret:preview\/[^"]*\/\*\/_access-\?\?\?\?\?\?/,
    );
    // Nothing else but what every function has (its log stream, X-Ray): no table, no other secret, no cluster.
    const others = resolved.flatMap((s) => s.actions).filter((a) => !a.startsWith('secretsmanager:'));
    expect(others.filter((a) => !/^(xray|logs):/.test(a))).toEqual([]);
  });

  test('an anonymous function URL, whose address the cluster callers get as ACCESS_VERIFIER_URL', () => {
    const urls = Object.values(resourcesOf(full.statelessTemplate, 'AWS::Lambda::Url'));
    expect(urls).toHaveLength(1);
    expect(urls[0].Properties.AuthType).toBe('NONE');
    const fnId = logicalIdOf(full.stateless.accessVerifier!.function);
    expect(JSON.stringify(urls[0].Properties.TargetFunctionArn)).toContain(fnId);
    for (const [name, fn] of full.stateless.clusterCallers()) {
      const env = resourcesOf(full.statelessTemplate, 'AWS::Lambda::Function')[logicalIdOf(fn)].Properties
        .Environment.Variables;
      expect([name, JSON.stringify(env.ACCESS_VERIFIER_URL ?? null)]).toEqual([
        name,
        expect.stringContaining('FunctionUrl'),
      ]);
    }
  });

  describe("behind an internal load balancer in the cluster's VPC (a Gateway's external auth)", () => {
    const lb = synthesize(verifierNetworkContext);
    const t = lb.statelessTemplate;

    test('an internal ALB in the given subnets; its one listener forwards everything to the verifier', () => {
      const albs = Object.values(resourcesOf(t, 'AWS::ElasticLoadBalancingV2::LoadBalancer')) as Json[];
      expect(albs).toHaveLength(1);
      expect(albs[0].Properties.Scheme).toBe('internal');
      expect(albs[0].Properties.Type).toBe('application');
      expect(albs[0].Properties.Subnets).toEqual(['subnet-0aaa1111bbbb2222c', 'subnet-0ddd3333eeee4444f']);
      const listeners = Object.values(resourcesOf(t, 'AWS::ElasticLoadBalancingV2::Listener')) as Json[];
      expect(listeners.map((l) => [l.Properties.Port, l.Properties.Protocol])).toEqual([[80, 'HTTP']]);
      // The default action, no rule: no routing by Host or path.
      expect(listeners[0].Properties.DefaultActions.map((a: Json) => a.Type)).toEqual(['forward']);
      expect(Object.keys(resourcesOf(t, 'AWS::ElasticLoadBalancingV2::ListenerRule'))).toEqual([]);
      const groups = Object.values(resourcesOf(t, 'AWS::ElasticLoadBalancingV2::TargetGroup')) as Json[];
      expect(groups).toHaveLength(1);
      expect(groups[0].Properties.TargetType).toBe('lambda');
      expect(JSON.stringify(groups[0].Properties.Targets)).toContain(
        logicalIdOf(lb.stateless.accessVerifier!.function),
      );
      expect(groups[0].Properties.TargetGroupAttributes).toEqual(
        expect.arrayContaining([{ Key: 'lambda.multi_value_headers.enabled', Value: 'true' }]),
      );
    });

    test('its security group admits the cluster security group on 80 alone, and sends nothing', () => {
      const albId = logicalIdOf(lb.stateless.accessVerifier!.loadBalancer!);
      const alb = resourcesOf(t, 'AWS::ElasticLoadBalancingV2::LoadBalancer')[albId];
      const sgIds = alb.Properties.SecurityGroups.map((g: Json) => g['Fn::GetAtt'][0]);
      expect(sgIds).toHaveLength(1);
      const sg = resourcesOf(t, 'AWS::EC2::SecurityGroup')[sgIds[0]];
      expect(sg.Properties.VpcId).toBe('vpc-0a1b2c3d4e5f60718');
      expect(sg.Properties.SecurityGroupIngress).toEqual([
        expect.objectContaining({
          IpProtocol: 'tcp',
          FromPort: 80,
          ToPort: 80,
          SourceSecurityGroupId: 'sg-0123456789abcdef0',
        }),
      ]);
      expect(JSON.stringify(sg.Properties.SecurityGroupIngress)).not.toContain('0.0.0.0/0');
      // allowAllOutbound false: CDK's placeholder rule that matches no traffic.
      expect(sg.Properties.SecurityGroupEgress).toEqual([
        expect.objectContaining({ CidrIp: '255.255.255.255/32', IpProtocol: 'icmp' }),
      ]);
      // The load balancer may invoke the verifier, and only it.
      const permissions = Object.values(resourcesOf(t, 'AWS::Lambda::Permission')) as Json[];
      expect(
        permissions.filter((p) => p.Properties.Principal === 'elasticloadbalancing.amazonaws.com'),
      ).toHaveLength(1);
    });

    test("the cluster callers' ACCESS_VERIFIER_URL is http://<the ALB's DNS name>", () => {
      const albId = logicalIdOf(lb.stateless.accessVerifier!.loadBalancer!);
      for (const [name, fn] of lb.stateless.clusterCallers()) {
        const env = resourcesOf(t, 'AWS::Lambda::Function')[logicalIdOf(fn)].Properties.Environment.Variables;
        expect([name, env.ACCESS_VERIFIER_URL]).toEqual([
          name,
          { 'Fn::Join': ['', ['http://', { 'Fn::GetAtt': [albId, 'DNSName'] }]] },
        ]);
      }
    });

    test('the three keys go together, with two subnets or more, and only with a protection', () => {
      const { clusterSecurityGroupId: _, ...partial } = verifierNetworkContext;
      expect(() => synthesize(partial)).toThrow(
        'verifierVpcId, verifierSubnetIds and clusterSecurityGroupId go together',
      );
      expect(() =>
        synthesize({ ...verifierNetworkContext, verifierSubnetIds: 'subnet-0aaa1111bbbb2222c' }),
      ).toThrow('verifierSubnetIds: at least two subnets');
      expect(() => synthesize({ ...verifierNetworkContext, clusterSecurityGroupId: 'default' })).toThrow(
        'clusterSecurityGroupId must be a security group id',
      );
      expect(() =>
        synthesize({ ...verifierNetworkContext, protection: 'none', defaultAccess: 'public' }),
      ).toThrow('need a protection');
      expect(() => synthesize({ verifierVpcId: 'vpc-0a1b2c3d4e5f60718' })).toThrow(
        'verifierVpcId set without eksClusterName',
      );
    });
  });
});
