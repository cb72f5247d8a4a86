import { createHmac, timingSafeEqual } from 'node:crypto';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { AuthKind } from '../../manifest/routes.js';
import { keys } from '../../manifest/tables.js';
import { ddb, table } from '../../shared/aws/dynamo.js';
import { config } from '../../shared/config.js';
import { matchesHash, sha256Hex } from '../../shared/crypto.js';
import { UnauthorizedError } from '../../shared/errors.js';

/**
 * Who is calling: the organization the credentials belong to. A GitHub webhook comes from GitHub, for no
 * one organization: `orgId` is empty and `githubWebhook` set (the handler finds whom it acts for).
 */
export interface Principal {
  orgId: string;
  githubWebhook?: true;
}

/** What a `githubWebhook` route authenticates with: the body as received and the webhook secret. */
export interface WebhookCredentials {
  rawBody: Buffer;
  secret: () => Promise<string>;
}

const API_KEY_RE = /^pvk_([a-z0-9]{8,40})_([A-Za-z0-9_-]{43})$/;
const CLIENT_ID_RE = /^pvc_[a-z0-9]{8,40}$/;
const DUMMY_HASH = sha256Hex('never-a-valid-secret');

/** Tenancy-table item for a credential. */
export interface CredentialItem {
  pk: string;
  orgId: string;
  secretHash: string;
  createdAt: string;
}

/**
 * Credentials found valid, per container, for a bounded time (`PREVIEW_AUTH_CACHE_SECONDS`, default 30,
 * at most 60): a status poll then costs one read, not two. What is cached is the stored hash, so the
 * presented secret is still compared every time; a revoked or rotated key stops working within the bound.
 * Unknown credentials are never cached (a new key works at once). Bounded in size.
 */
const cache = new Map<string, { orgId: string; secretHash: Buffer; until: number }>();
const CACHE_MAX = 10_000;

async function check(kind: 'apiKey' | 'client', pk: string, secret: string): Promise<Principal> {
  const now = Date.now();
  const hit = cache.get(pk);
  if (hit && hit.until > now) {
    if (!matchesHash(secret, hit.secretHash)) throw new UnauthorizedError(UNAUTHORIZED[kind]);
    return { orgId: hit.orgId };
  }
  if (hit) cache.delete(pk);
  const { Item } = await ddb().send(new GetCommand({ TableName: table('tenancy'), Key: { pk } }));
  const item = Item as CredentialItem | undefined;
  // Compare even when the credential is unknown, so both paths cost the same.
  const ok = matchesHash(secret, item?.secretHash ?? DUMMY_HASH);
  if (!item || !ok) throw new UnauthorizedError(UNAUTHORIZED[kind]);
  const ttl = config().authCacheSeconds;
  if (ttl > 0) {
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(pk, {
      orgId: item.orgId,
      secretHash: Buffer.from(item.secretHash, 'hex'),
      until: now + ttl * 1000,
    });
  }
  return { orgId: item.orgId };
}

const SIGNATURE_RE = /^sha256=([0-9a-f]{64})$/i;

/**
 * The 401 of each credential kind: it says which credential the route takes and where it goes, never
 * whether the one presented was missing, malformed or wrong (they all answer the same).
 */
export const UNAUTHORIZED: Record<AuthKind, string> = {
  apiKey:
    'missing or invalid credentials: this route takes an organization API key in the Authorization header ' +
    '(Bearer pvk_…)',
  client:
    "missing or invalid credentials: this route takes an organization's client credentials in the " +
    'svc-client-id and svc-client-secret headers',
  githubWebhook:
    "missing or invalid X-Hub-Signature-256: this route takes GitHub's signature of the body under the " +
    "GitHub App's webhook secret",
};

/**
 * Whether `header` (`X-Hub-Signature-256`) is `sha256=` + the hex HMAC-SHA256 of the raw body under the
 * webhook secret (GitHub's scheme). The digests are compared in constant time (`timingSafeEqual`); a
 * missing or malformed header is simply not a match.
 */
export function verifySignature(secret: string, body: Buffer | string, header: string | undefined): boolean {
  const m = SIGNATURE_RE.exec(header?.trim() ?? '');
  if (!m || !secret) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  const given = Buffer.from(m[1]!, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Authenticate a request. `apiKey`: `Authorization: Bearer pvk_<keyId>_<secret>`. `client`:
 * `svc-client-id` and `svc-client-secret`. Only SHA-256 digests of secrets are stored; they are compared
 * in constant time. `githubWebhook`: `X-Hub-Signature-256` must be the HMAC-SHA256 of the raw body (as
 * received, before any parsing) under the webhook secret, compared in constant time. Any missing,
 * malformed or wrong credential is the same 401, which says what the route takes (`UNAUTHORIZED`).
 * @param headers lower-cased request headers
 */
export async function authenticate(
  kind: AuthKind,
  headers: Record<string, string>,
  webhook?: WebhookCredentials,
): Promise<Principal> {
  if (kind === 'githubWebhook') {
    const signature = headers['x-hub-signature-256'];
    if (!signature || !webhook) throw new UnauthorizedError(UNAUTHORIZED.githubWebhook);
    if (!verifySignature(await webhook.secret(), webhook.rawBody, signature))
      throw new UnauthorizedError(UNAUTHORIZED.githubWebhook);
    return { orgId: '', githubWebhook: true };
  }
  if (kind === 'apiKey') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '');
    const key = m?.[1] ? API_KEY_RE.exec(m[1]) : null;
    if (!key) throw new UnauthorizedError(UNAUTHORIZED.apiKey);
    return check('apiKey', keys.tenancy.apiKey(key[1]!), key[2]!);
  }
  const clientId = headers['svc-client-id'] ?? '';
  const secret = headers['svc-client-secret'] ?? '';
  if (!CLIENT_ID_RE.test(clientId) || secret.length === 0 || secret.length > 256)
    throw new UnauthorizedError(UNAUTHORIZED.client);
  return check('client', keys.tenancy.client(clientId), secret);
}
