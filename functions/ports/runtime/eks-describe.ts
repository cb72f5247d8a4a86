/**
 * The cluster's API looked up when it is needed (`eks:DescribeCluster`), for code that runs outside the
 * stack's functions: the CLI and the local host in AWS mode (registry/runtime.ts `runtime`). The Lambda
 * functions never import it: the stack resolves the endpoint and CA at deploy time (EKS_CLUSTER_ENDPOINT,
 * EKS_CLUSTER_CA_DATA), which keeps `@aws-sdk/client-eks` out of their bundles.
 */
import { DescribeClusterCommand, type DescribeClusterCommandOutput, EKSClient } from '@aws-sdk/client-eks';
import { DeployFailed, TransientError } from '../../shared/step-errors.js';
import type { ClusterApi } from './eks.js';

/** A lookup of cluster `name`'s endpoint and CA (no explicit endpoint: `AWS_ENDPOINT_URL_EKS` applies). */
export function describeCluster(
  name: string,
  region: string,
  eks: EKSClient = new EKSClient({ region }),
): () => Promise<ClusterApi> {
  return async () => {
    let out: DescribeClusterCommandOutput;
    try {
      out = await eks.send(new DescribeClusterCommand({ name }));
    } catch (err) {
      const aws = err as { name?: string; message?: string };
      if (aws.name === 'ResourceNotFoundException')
        throw new DeployFailed(`EKS cluster ${name} not found in ${region}`);
      if (aws.name === 'AccessDeniedException' || aws.name === 'UnauthorizedException')
        throw new DeployFailed(`not allowed to describe EKS cluster ${name}: ${aws.message}`);
      throw new TransientError(`eks:DescribeCluster failed: ${aws.name}: ${aws.message}`);
    }
    const c = out.cluster;
    if (!c?.endpoint || !c.certificateAuthority?.data)
      throw new DeployFailed(
        `EKS cluster ${name} has no endpoint or CA yet (status ${c?.status ?? 'unknown'})`,
      );
    return { endpoint: c.endpoint, caData: c.certificateAuthority.data };
  };
}
