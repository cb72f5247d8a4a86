/**
 * How the fake Kubernetes API (index.ts) is reached: over HTTPS with a self-signed certificate for
 * 127.0.0.1 (client-node refuses plain http unless TLS verification is off, which the product never
 * does), and with an EKS bearer token (`k8s-aws-v1.<base64url presigned GetCallerIdentity URL>`) whose
 * shape, and with `verify` its SigV4 signature, are checked. Test support code, not product.
 */
import { execFile } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

// ---- TLS: one self-signed certificate per process ------------------------------------------------------

let certificate: Promise<{ key: Buffer; cert: Buffer }> | undefined;
/** A self-signed certificate (its own CA) for 127.0.0.1 and localhost, made with the openssl CLI. */
export function loopbackCertificate(): Promise<{ key: Buffer; cert: Buffer }> {
  certificate ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fake-kube-tls-'));
    try {
      await promisify(execFile)('openssl', [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=fake-kubernetes',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ]);
      return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })();
  return certificate;
}

// ---- EKS token checks ------------------------------------------------------------------------------------

export interface TokenCheck {
  clusterName: string;
  region: string;
  /** Recompute the signature with these credentials (the test's); without them only the shape is checked. */
  verify?: { accessKeyId: string; secretAccessKey: string };
}

const rfc3986 = (s: string) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

/** Why a bearer token would not be accepted by EKS (as far as can be told without STS), or undefined. */
export function tokenProblem(authorization: string | undefined, check: TokenCheck, now = Date.now()) {
  const prefix = 'Bearer k8s-aws-v1.';
  if (!authorization?.startsWith(prefix)) return 'no k8s-aws-v1 bearer token';
  let url: URL;
  try {
    url = new URL(Buffer.from(authorization.slice(prefix.length), 'base64url').toString('utf8'));
  } catch {
    return 'the token is not a base64url URL';
  }
  const q = url.searchParams;
  const host = `sts.${check.region}.amazonaws.com`;
  if (url.protocol !== 'https:' || (url.host !== host && url.host !== 'sts.amazonaws.com'))
    return `the token is not for ${host}`;
  if (q.get('Action') !== 'GetCallerIdentity' || q.get('Version') !== '2011-06-15')
    return 'the token is not a GetCallerIdentity call';
  if (q.get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256') return 'the token is not SigV4-signed';
  const credential = q.get('X-Amz-Credential') ?? '';
  const [akid, day, region, service, terminator] = credential.split('/');
  if (!akid || region !== check.region || service !== 'sts' || terminator !== 'aws4_request')
    return `bad credential scope ${credential}`;
  const signedHeaders = (q.get('X-Amz-SignedHeaders') ?? '').split(';');
  if (!signedHeaders.includes('host') || !signedHeaders.includes('x-k8s-aws-id'))
    return 'x-k8s-aws-id is not among the signed headers';
  const date = q.get('X-Amz-Date') ?? '';
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!m || !day || !date.startsWith(day)) return `bad X-Amz-Date ${date}`;
  const signedAt = Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
  if (now - signedAt > 15 * 60_000 || signedAt - now > 5 * 60_000) return 'the token has expired';
  const expires = Number(q.get('X-Amz-Expires'));
  if (!(expires > 0 && expires <= 900)) return `bad X-Amz-Expires ${q.get('X-Amz-Expires')}`;
  const signature = q.get('X-Amz-Signature') ?? '';
  if (!/^[0-9a-f]{64}$/.test(signature)) return 'no signature';
  if (!check.verify) return undefined;
  if (akid !== check.verify.accessKeyId) return `signed by ${akid}, not by the test's key`;
  const query = [...q.entries()]
    .filter(([k]) => k !== 'X-Amz-Signature')
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const headers: Record<string, string> = { host: url.host, 'x-k8s-aws-id': check.clusterName };
  const canonical = [
    'GET',
    url.pathname || '/',
    query,
    ...signedHeaders.map((h) => `${h}:${headers[h] ?? ''}`),
    '',
    signedHeaders.join(';'),
    createHash('sha256').update('').digest('hex'),
  ].join('\n');
  const scope = `${day}/${region}/sts/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', date, scope, createHash('sha256').update(canonical).digest('hex')].join(
    '\n',
  );
  const key = hmac(
    hmac(hmac(hmac(`AWS4${check.verify.secretAccessKey}`, day), region), 'sts'),
    'aws4_request',
  );
  if (createHmac('sha256', key).update(toSign).digest('hex') !== signature)
    return `the signature does not match (a token for another cluster than ${check.clusterName}?)`;
  return undefined;
}
