/**
 * The cluster's API looked up when it is needed (`eks:DescribeCluster`), for code that runs outside the
 * stack's functions: the CLI and the local host in AWS mode (registry/runtime/whole.ts `runtime`). The Lambda
 * functions never import it: the stack resolves the endpoint and CA at deploy time (EKS_CLUSTER_ENDPOINT,
 * EKS_CLUSTER_CA_DATA), which keeps `@aws-sdk/client-eks` out of their bundles.
 */
import {
  DescribeClusterCommand,
  type DescribeClusterCommandOutput,
  type EKSClient,
} from '@aws-sdk/client-eks';
import { isAwsError } from '../../../shared/aws/aws-errors.js';
import { DeployFailed, TransientError } from '../../../shared/step-errors.js';
import type { ClusterApi } from './connection.js';

/**
 * A lookup of cluster `name`'s endpoint and CA through `eks` (the registry passes the container's client,
 * registry/aws-clients.ts `eksClient()`: the SDK's endpoint handling, `AWS_ENDPOINT_URL_EKS` included).
 */
export function describeCluster(name: string, region: string, eks: EKSClient): () => Promise<ClusterApi> {
  return async () => {
    let out: DescribeClusterCommandOutput;
    try {
      out = await eks.send(new DescribeClusterCommand({ name }));
    } catch (err) {
      const e = err as Error;
      if (isAwsError(err, 'ResourceNotFoundException'))
        throw new DeployFailed(`EKS cluster ${name} not found in ${region}`);
      if (isAwsError(err, 'AccessDeniedException', 'UnauthorizedException'))
        throw new DeployFailed(`not allowed to describe EKS cluster ${name}: ${e.message}`);
      throw new TransientError(`eks:DescribeCluster failed: ${e?.name}: ${e?.message}`, { cause: err });
    }
    const c = out.cluster;
    if (!c?.endpoint || !c.certificateAuthority?.data)
      throw new DeployFailed(
        `EKS cluster ${name} has no endpoint or CA yet (status ${c?.status ?? 'unknown'})`,
      );
    return { endpoint: c.endpoint, caData: c.certificateAuthority.data };
  };
}
