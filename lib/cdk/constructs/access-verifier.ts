import { ArnFormat, CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as targets from 'aws-cdk-lib/aws-elasticloadbalancingv2-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { Tables, VerifierNetwork } from '../access.js';
import { acknowledge, acknowledgeWildcardResource } from '../nag.js';
import { ServiceFunction } from './service-function.js';

/** The verifier's handler: a function URL, in no manifest (test/bench/bundles.ts budgets it by this). */
export const ACCESS_VERIFIER_ENTRY = 'functions/api/access/verify.ts';

/** The application's access key's bundle name (functions/core/access.ts `ACCESS_KEY_APP`). */
const ACCESS_KEY_APP = '_access';

export interface AccessVerifierProps {
  tables: Tables;
  /** Where secret bundles live (SECRET_NAME_PREFIX): the access keys are `<prefix>/<applicationId>/_access`. */
  secretNamePrefix: string;
  logRetention: logs.RetentionDays;
  /** The cluster's network: an internal load balancer there in front of the verifier. */
  network?: VerifierNetwork;
}

/**
 * The access verifier of protected previews on EKS (functions/api/access/verify.ts): a Gateway's external
 * auth (eks/door/gateway.ts) asks it about each visitor of a protected app, so it must answer without the
 * service's authentication. With the cluster's network, behind an internal load balancer there (the auth
 * request carries the visitor's Host, and a load balancer's default action routes by none); a Lambda
 * function URL (auth NONE) beside it, not a route of the API:
 * the API authenticates every route with the organization's token and describes itself in lib/openapi.ts,
 * neither of which fits an anonymous subrequest, and a function URL costs no API Gateway request per check.
 * It reveals nothing but 200 or 401 (no key, no token in an answer). Its only grant: GetSecretValue of the
 * applications' access keys (`<prefix>/*\/_access-*`), no table, no other secret.
 */
export class AccessVerifier extends Construct {
  readonly function: ServiceFunction;
  /**
   * ACCESS_VERIFIER_URL of the cluster's callers: `http://<internal load balancer>` with a network, else
   * the function URL `https://<id>.lambda-url.<region>.on.aws/`.
   */
  readonly url: string;
  /** The internal load balancer in the cluster's VPC (with a network only). */
  readonly loadBalancer?: elbv2.ApplicationLoadBalancer;

  constructor(scope: Construct, id: string, props: AccessVerifierProps) {
    super(scope, id);
    this.function = new ServiceFunction(this, 'AccessVerifierFunction', {
      entry: ACCESS_VERIFIER_ENTRY,
      kind: 'api',
      tables: props.tables,
      secretNamePrefix: props.secretNamePrefix,
      logRetention: props.logRetention,
      description: "Answer a Gateway's external auth of protected previews (access cookie or link)",
      timeout: Duration.seconds(5),
    });
    const keys = Stack.of(this).formatArn({
      service: 'secretsmanager',
      resource: 'secret',
      // Secrets Manager appends `-` and six random characters to a secret's name in its ARN.
      resourceName: `${props.secretNamePrefix}/*/${ACCESS_KEY_APP}-??????`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [keys] }),
    );
    if (this.function.role)
      acknowledgeWildcardResource(
        this.function.role,
        keys,
        'Access keys are named <secretNamePrefix>/<applicationId>/_access, the application known only at run ' +
          'time; the grant is GetSecretValue of those secrets alone.',
      );
    const fnUrl = this.function.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.NONE });
    new CfnOutput(this, 'Url', {
      value: fnUrl.url,
      description: 'The access verifier as a function URL (routes by Host: callers that send its own)',
    });
    this.loadBalancer = props.network && this.internalLoadBalancer(props.network);
    this.url = this.loadBalancer ? `http://${this.loadBalancer.loadBalancerDnsName}` : fnUrl.url;
  }

  /**
   * An internal Application Load Balancer in the cluster's VPC whose one listener (HTTP 80) forwards every
   * request to the verifier, whatever its Host: a Gateway's external auth carries the visitor's Host, which
   * a function URL would refuse. Its security group admits the cluster security group on 80 and nothing
   * else, and sends nothing (a Lambda target is invoked, not connected to). Multi-value headers on, so
   * each Set-Cookie of an answer reaches the visitor.
   */
  private internalLoadBalancer(network: VerifierNetwork): elbv2.ApplicationLoadBalancer {
    // The subnets are named by id below; CDK wants a zone per subnet, which no resource carries (synthesis
    // looks nothing up, so it stays env-agnostic): placeholders.
    const vpc = ec2.Vpc.fromVpcAttributes(this, 'ClusterVpc', {
      vpcId: network.vpcId,
      availabilityZones: network.subnetIds.map((_, i) => `zone-${i}`),
    });
    const securityGroup = new ec2.SecurityGroup(this, 'LoadBalancerSecurityGroup', {
      vpc,
      description: 'The access verifier load balancer: HTTP from the cluster security group only',
      allowAllOutbound: false,
    });
    securityGroup.addIngressRule(
      ec2.Peer.securityGroupId(network.clusterSecurityGroupId),
      ec2.Port.tcp(80),
      "Gateway proxies' external auth requests",
    );
    const loadBalancer = new elbv2.ApplicationLoadBalancer(this, 'LoadBalancer', {
      vpc,
      internetFacing: false,
      securityGroup,
      vpcSubnets: {
        subnets: network.subnetIds.map((id, i) => ec2.Subnet.fromSubnetId(this, `Subnet${i}`, id)),
      },
      dropInvalidHeaderFields: true,
    });
    const listener = loadBalancer.addListener('Http', { port: 80, open: false });
    const target = listener.addTargets('Verifier', {
      targets: [new targets.LambdaTarget(this.function)],
    });
    target.setAttribute('lambda.multi_value_headers.enabled', 'true');
    acknowledge(
      loadBalancer,
      'AwsSolutions-ELB2',
      'An internal load balancer with one Lambda target: each request is logged by the verifier itself ' +
        '(its log group), an access log bucket would repeat it.',
    );
    new CfnOutput(this, 'LoadBalancerUrl', {
      value: `http://${loadBalancer.loadBalancerDnsName}`,
      description: "The access verifier as the cluster reaches it (a Gateway's external auth)",
    });
    return loadBalancer;
  }
}
