import type { Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as cr from 'aws-cdk-lib/custom-resources';
import { clusterArn, clusterDescribeActions } from '../access.js';
import { acknowledge } from '../nag.js';

/**
 * The cluster's Kubernetes API endpoint and CA, resolved at deploy time: an `eks:DescribeCluster` of the
 * cluster (a custom resource), whose answer the functions that call the
 * cluster get as EKS_CLUSTER_ENDPOINT and EKS_CLUSTER_CA_DATA. So no function bundles the EKS client (about
 * 50 KB minified each) or calls DescribeCluster on a cold start; the custom resource's role is the only
 * one granted the action, on that cluster only. A cluster that is not ACTIVE has no endpoint yet: the
 * deploy fails, naming the missing field. The CA (about 1.5 KB) counts against Lambda's 4 KB of
 * environment per function.
 */
export function clusterApi(scope: Stack, clusterName: string): { endpoint: string; caData: string } {
  const call: cr.AwsSdkCall = {
    service: 'EKS',
    action: 'DescribeCluster',
    parameters: { name: clusterName },
    // Read when created and when the cluster's name changes. A cluster re-created under the same name has
    // a new CA: deploy with another name, or re-create this resource (docs/deploy-to-aws.md).
    physicalResourceId: cr.PhysicalResourceId.of(`${clusterName}-api`),
    outputPaths: ['cluster.endpoint', 'cluster.certificateAuthority.data'],
  };
  const resource = new cr.AwsCustomResource(scope, 'ClusterApi', {
    onCreate: call,
    onUpdate: call,
    installLatestAwsSdk: false,
    policy: cr.AwsCustomResourcePolicy.fromStatements([
      new iam.PolicyStatement({
        actions: clusterDescribeActions,
        resources: [clusterArn(scope, clusterName)],
      }),
    ]),
  });
  // The provider function CDK adds for every AwsCustomResource of the stack (a singleton, at stack level).
  const provider = scope.node.tryFindChild(
    `AWS${cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '')}`,
  );
  const providerRole = provider?.node.tryFindChild('ServiceRole');
  if (providerRole)
    acknowledge(
      providerRole,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      "CDK's AwsCustomResource provider (ClusterApi: one eks:DescribeCluster at deploy time) writes its own " +
        'log with the basic execution policy; it runs only during deployments and its other grant is that ' +
        'one call on that one cluster.',
    );
  return {
    endpoint: resource.getResponseField('cluster.endpoint'),
    caData: resource.getResponseField('cluster.certificateAuthority.data'),
  };
}
