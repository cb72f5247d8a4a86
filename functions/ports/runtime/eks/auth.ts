/**
 * Authentication to an EKS cluster's Kubernetes API, as `aws eks get-token` and aws-iam-authenticator do
 * it: the bearer token is `k8s-aws-v1.` + base64url (unpadded) of a presigned STS `GetCallerIdentity` URL
 * whose signature covers an `x-k8s-aws-id: <cluster name>` header. EKS calls that URL (sending the header
 * with its own name) and maps the caller's IAM principal to a Kubernetes user through the cluster's access
 * entries. A token is accepted for 15 minutes after its signing time; `EksTokens` signs a new one after
 * 10 (or sooner, before the credentials behind it expire).
 *
 * No SDK client builds this token (the CLI's `aws eks get-token` does, and @kubernetes/client-node runs
 * that CLI as an exec plugin, which a Lambda function does not have), so it is made here: the SDK's own
 * SigV4 signer (@smithy/signature-v4) and hash (@smithy/core/checksum's `Sha256`) presigning one URL.
 */
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';

export const TOKEN_PREFIX = 'k8s-aws-v1.';
/** The header that binds a token to one cluster (signed, not sent: EKS supplies it when it checks). */
export const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/** What `aws eks get-token` asks for; EKS itself honours a token for 15 minutes regardless. */
export const PRESIGN_EXPIRES_SECONDS = 60;
/** EKS's own limit on a token's age. */
export const TOKEN_LIFETIME_MS = 15 * 60_000;

/** AWS credentials, as SDK credential providers resolve them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

export type CredentialProvider = () => Promise<AwsCredentials>;

export interface TokenRequest {
  clusterName: string;
  region: string;
  credentials: AwsCredentials | CredentialProvider;
  /** Default: the regional endpoint, `sts.<region>.amazonaws.com` (`.amazonaws.com.cn` in China). */
  stsHost?: string;
  signingDate?: Date;
}

/** The regional STS host of a region (EKS accepts tokens presigned for the regional endpoint). */
export function stsHostOf(region: string): string {
  return `sts.${region}.amazonaws.com${region.startsWith('cn-') ? '.cn' : ''}`;
}

/** The presigned `GetCallerIdentity` URL a token carries. */
export async function presignedCallerIdentityUrl(req: TokenRequest): Promise<string> {
  const host = req.stsHost ?? stsHostOf(req.region);
  const signer = new SignatureV4({
    credentials: req.credentials,
    region: req.region,
    service: 'sts',
    // The SHA-256 the SDK clients sign with (node:crypto under Node.js).
    sha256: Sha256,
  });
  const request: Parameters<SignatureV4['presign']>[0] = {
    method: 'GET',
    protocol: 'https:',
    hostname: host,
    path: '/',
    query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
    headers: { host, [CLUSTER_ID_HEADER]: req.clusterName },
  };
  const signed = await signer.presign(request, {
    expiresIn: PRESIGN_EXPIRES_SECONDS,
    ...(req.signingDate ? { signingDate: req.signingDate } : {}),
  });
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(signed.query ?? {}))
    for (const value of Array.isArray(v) ? v : [v]) if (value != null) query.append(k, value);
  return `https://${host}/?${query.toString()}`;
}

/** A bearer token for the cluster's Kubernetes API. */
export async function eksToken(req: TokenRequest): Promise<string> {
  return TOKEN_PREFIX + Buffer.from(await presignedCallerIdentityUrl(req), 'utf8').toString('base64url');
}

export interface EksTokensOptions {
  clusterName: string;
  region: string;
  credentials: CredentialProvider;
  stsHost?: string;
  /** Sign a new token once the cached one is this old (default 10 minutes, within EKS's 15). */
  refreshAfterMs?: number;
  now?: () => number;
}

/**
 * Tokens for one cluster, cached: a token is reused until it is `refreshAfterMs` old, or until one minute
 * before the credentials that signed it expire, whichever comes first. Concurrent callers share one
 * signing. `invalidate` drops the cached token (after a 401).
 */
export class EksTokens {
  private cached?: { token: string; renewAt: number };
  private pending?: Promise<string>;
  private readonly now: () => number;
  constructor(private readonly opts: EksTokensOptions) {
    this.now = opts.now ?? Date.now;
  }

  async get(): Promise<string> {
    if (this.cached && this.now() < this.cached.renewAt) return this.cached.token;
    this.pending ??= this.sign().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  invalidate(): void {
    this.cached = undefined;
  }

  private async sign(): Promise<string> {
    const signedAt = this.now();
    const credentials = await this.opts.credentials();
    const token = await eksToken({
      clusterName: this.opts.clusterName,
      region: this.opts.region,
      credentials,
      stsHost: this.opts.stsHost,
      signingDate: new Date(signedAt),
    });
    let renewAt = signedAt + Math.min(this.opts.refreshAfterMs ?? 10 * 60_000, TOKEN_LIFETIME_MS - 60_000);
    if (credentials.expiration) renewAt = Math.min(renewAt, credentials.expiration.getTime() - 60_000);
    this.cached = { token, renewAt };
    return token;
  }
}
