import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { SignatureV4 } from '@smithy/signature-v4';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { canonicalQuery, sigv4Signature } from '../../../test/support/sigv4.js';
import { parseEndpoint, S3Objects, type S3Target, s3TargetFromEnv } from '../../shared/s3-objects.js';
import { NodeSha256 } from '../../shared/sha256.js';
import { LocalMediaStore } from './local-files.js';
import { MEDIA_URL_TTL_SECONDS, type MediaStore } from './port.js';
import { S3MediaReader, S3MediaWriter } from './s3.js';

/*
 * The MediaStore contract, run against every adapter: local files (for real, in a temp dir), and S3 (the
 * reader and the writer together) pointed at the loopback AWS fake. Clocks are injected: links are
 * checked at chosen times. The S3 reader's presigned URLs are held to the ones the previous adapter
 * minted from an SDK S3Client's configuration (`legacyPresign`, kept below verbatim), and their SigV4
 * signature is recomputed by hand.
 */

const dir = mkdtempSync(join(tmpdir(), 'media-'));
let aws: FakeAws;
beforeAll(async () => {
  aws = await new FakeAws(dir).start();
});
afterAll(async () => {
  await aws.stop();
  rmSync(dir, { recursive: true, force: true });
});

const T0 = Date.parse('2026-01-01T00:00:00Z');
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

function mediaContract(name: string, make: (now: () => number) => MediaStore) {
  describe(`${name} honours the MediaStore contract`, () => {
    test('a signed link opens its path until it expires; any change to it is forbidden', async () => {
      let now = T0;
      const store = make(() => now);
      const query = new URLSearchParams(await store.signLink('/report/run1', 60));
      const expires = query.get('expires')!;
      const sig = query.get('sig')!;
      expect(Number(expires)).toBe(T0 / 1000 + 60);
      expect(await store.checkLink('/report/run1', expires, sig)).toBe('ok');
      expect(await store.checkLink('/report/run2', expires, sig)).toBe('forbidden');
      expect(await store.checkLink('/report/run1', String(Number(expires) + 1), sig)).toBe('forbidden');
      expect(await store.checkLink('/report/run1', expires, `${sig.slice(0, -1)}x`)).toBe('forbidden');
      expect(await store.checkLink('/report/run1', undefined, sig)).toBe('forbidden');
      expect(await store.checkLink('/report/run1', expires, undefined)).toBe('forbidden');
      expect(await store.checkLink('/report/run1', '1e9', sig)).toBe('forbidden');
      now = T0 + 59_999;
      expect(await store.checkLink('/report/run1', expires, sig)).toBe('ok');
      now = T0 + 60_000;
      expect(await store.checkLink('/report/run1', expires, sig)).toBe('expired');
      // Checked signature first: a forged link is forbidden, expired or not.
      expect(await store.checkLink('/report/run1', expires, 'forged')).toBe('forbidden');
    });

    test('a link signed by another store (another key) is forbidden', async () => {
      const a = make(() => T0);
      const query = new URLSearchParams(await a.signLink('/report/r', 60));
      const other = new LocalMediaStore(mkdtempSync(join(dir, 'other-')), { now: () => T0 });
      expect(await other.checkLink('/report/r', query.get('expires')!, query.get('sig')!)).toBe('forbidden');
    });

    test('put stores an object; url is a GET URL of it valid for an hour from now', async () => {
      const store = make(() => Date.now());
      const key = `runs/org/run-${Date.now()}/step-001-s.png`;
      await store.put(key, PNG, 'image/png');
      const url = await store.url(key, 'http://127.0.0.1:9');
      expect(url).toContain(key.split('/').pop()!);
      expect(MEDIA_URL_TTL_SECONDS).toBe(3600);
      const q = new URL(url).searchParams;
      expect(q.get('expires') ?? q.get('X-Amz-Expires')).toMatch(/^\d+$/);
    });
  });
}

mediaContract('LocalMediaStore', (now) => new LocalMediaStore(dir, { now }));

const CREDENTIALS = { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake-secret' };
const fakeTarget = (): S3Target => ({
  region: 'eu-west-1',
  endpoint: parseEndpoint(aws.url),
  credentials: async () => CREDENTIALS,
});

/** Both S3 halves over one bucket, as one MediaStore (in AWS they are separate adapters). */
function s3Media(
  bucket: string,
  loadLinkKey: () => Promise<Buffer>,
  now: () => number = Date.now,
  target: S3Target = fakeTarget(),
): MediaStore & { reader: S3MediaReader } {
  const reader = new S3MediaReader(target, bucket, loadLinkKey, { now });
  const writer = new S3MediaWriter(new S3Objects(target, bucket));
  return {
    reader,
    put: (key, body, type) => writer.put(key, body, type),
    url: (key, base) => reader.url(key, base),
    signLink: (path, ttl) => reader.signLink(path, ttl),
    checkLink: (path, expires, sig) => reader.checkLink(path, expires, sig),
  };
}
mediaContract('S3 media (reader and writer)', (now) =>
  s3Media('preview-media', async () => Buffer.from('k'.repeat(64)), now),
);

/**
 * The presigned URL of the previous S3 adapter (S3MediaStore.url, which took an SDK S3Client for its
 * region, credentials and endpoint), kept verbatim as the reference the reader must reproduce.
 */
async function legacyPresign(client: S3Client, bucket: string, key: string, nowMs: number): Promise<string> {
  const encodeKey = (k: string): string => k.split('/').map(encodeURIComponent).join('/');
  const config = client.config;
  const region = await config.region();
  const custom = config.endpoint ? await config.endpoint() : undefined;
  const protocol = custom?.protocol ?? 'https:';
  const hostname = custom?.hostname ?? `${bucket}.s3.${region}.amazonaws.com`;
  const port = custom?.port;
  const path = custom
    ? `${(custom.path ?? '').replace(/\/+$/, '')}/${bucket}/${encodeKey(key)}`
    : `/${encodeKey(key)}`;
  const host = port ? `${hostname}:${port}` : hostname;
  const signer = new SignatureV4({
    credentials: config.credentials,
    region,
    service: 's3',
    sha256: NodeSha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  const signed = await signer.presign(
    {
      method: 'GET',
      protocol,
      hostname,
      port,
      path,
      query: {},
      headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
    },
    { expiresIn: MEDIA_URL_TTL_SECONDS, signingDate: new Date(nowMs) },
  );
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(signed.query ?? {}))
    for (const value of Array.isArray(v) ? v : [v]) if (value != null) query.append(k, value);
  return `${protocol}//${host}${path}?${query.toString()}`;
}

/** The signature a presigned GET URL must carry (SigV4 by hand, test/support/sigv4.ts). */
function expectedSignature(url: URL, secretAccessKey: string, region: string): string {
  const canonicalRequest = [
    'GET',
    url.pathname,
    canonicalQuery(url.searchParams, ['X-Amz-Signature']),
    `host:${url.host}`,
    '',
    'host',
    'UNSIGNED-PAYLOAD',
  ].join('\n');
  const amzDate = url.searchParams.get('X-Amz-Date')!;
  return sigv4Signature({ canonicalRequest, amzDate, region, service: 's3', secretAccessKey }).signature;
}

describe('S3MediaReader presigns exactly the URLs the previous adapter did', () => {
  const keys = ['runs/o/r/step-001-a.png', 'runs/org 1/r/vidéo (1).mp4', 'runs/o/r/a+b=c&d~e!.webm'];
  const cases: {
    name: string;
    endpoint?: string;
    credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  }[] = [
    { name: 'AWS, virtual-hosted', credentials: CREDENTIALS },
    {
      name: 'AWS, virtual-hosted, with a session token',
      credentials: { ...CREDENTIALS, sessionToken: 'IQoJb3JpZ2luX2VjE/token+with=chars' },
    },
    { name: 'a custom endpoint, path-style', endpoint: 'http://127.0.0.1:4566', credentials: CREDENTIALS },
    {
      name: 'a custom endpoint with a path and https',
      endpoint: 'https://s3.example.test:8443/store/',
      credentials: CREDENTIALS,
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const region = 'eu-west-1';
      const client = new S3Client({
        region,
        credentials: c.credentials,
        ...(c.endpoint ? { endpoint: c.endpoint } : {}),
      });
      const reader = new S3MediaReader(
        {
          region,
          credentials: async () => c.credentials,
          ...(c.endpoint ? { endpoint: parseEndpoint(c.endpoint) } : {}),
        },
        'my-media',
        async () => Buffer.from('k'),
        { now: () => T0 + 1234 },
      );
      for (const key of keys) {
        const url = await reader.url(key, 'ignored');
        expect(url).toBe(await legacyPresign(client, 'my-media', key, T0 + 1234));
        const parsed = new URL(url);
        expect(parsed.searchParams.get('X-Amz-Signature')).toBe(
          expectedSignature(parsed, c.credentials.secretAccessKey, region),
        );
        expect(parsed.searchParams.get('X-Amz-Security-Token')).toBe(c.credentials.sessionToken ?? null);
      }
    });
  }

  test('the endpoint comes from AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, unless ignored; none: AWS', () => {
    const endpoint = (env: NodeJS.ProcessEnv) => s3TargetFromEnv('eu-west-1', env).endpoint;
    expect(endpoint({})).toBeUndefined();
    expect(endpoint({ AWS_ENDPOINT_URL: 'http://127.0.0.1:1' })).toEqual({
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 1,
      path: '/',
    });
    expect(
      endpoint({ AWS_ENDPOINT_URL: 'http://127.0.0.1:1', AWS_ENDPOINT_URL_S3: 'https://s3.test/x' }),
    ).toEqual({
      protocol: 'https:',
      hostname: 's3.test',
      path: '/x',
    });
    expect(
      endpoint({ AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:1', AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' }),
    ).toBeUndefined();
    // What the SDK's own parsing gives the previous adapter for the same URL.
    expect(parseEndpoint('http://127.0.0.1:9/x/')).toEqual({
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 9,
      path: '/x/',
    });
  });
});

describe('specifics', () => {
  test('LocalMediaStore: files under the data dir; URL served at /media/<key> with expires and sig', async () => {
    const store = new LocalMediaStore(dir, { now: () => T0 });
    await store.put('runs/o/r/video.mp4', Buffer.from('mp4'), 'video/mp4');
    expect(readFileSync(join(dir, 'media', 'runs/o/r/video.mp4'), 'utf8')).toBe('mp4');
    expect(store.object('runs/o/r/video.mp4')).toMatchObject({ size: 3, contentType: 'video/mp4' });
    const url = new URL(await store.url('runs/o/r/video.mp4', 'http://127.0.0.1:3000'));
    expect(url.origin + url.pathname).toBe('http://127.0.0.1:3000/media/runs/o/r/video.mp4');
    expect(url.searchParams.get('expires')).toBe(String(T0 / 1000 + 3600));
    expect(
      await store.checkLink(url.pathname, url.searchParams.get('expires')!, url.searchParams.get('sig')!),
    ).toBe('ok');
    await expect(store.put('../escape', Buffer.from('x'), 'image/png')).rejects.toThrow();
    expect(store.object('../media-link.key')).toBeUndefined();
    // The link key persists in the data dir (links survive a restart), private to the owner.
    const again = new LocalMediaStore(dir, { now: () => T0 });
    expect(
      await again.checkLink(url.pathname, url.searchParams.get('expires')!, url.searchParams.get('sig')!),
    ).toBe('ok');
    const { statSync } = await import('node:fs');
    expect(statSync(join(dir, 'media-link.key')).mode & 0o777).toBe(0o600);
  });

  test('S3 media: the object lands in the bucket with its type; the URL is a SigV4 presigned GET of 3600 s', async () => {
    const store = s3Media(
      'preview-media',
      async () => Buffer.from('k'),
      () => T0,
    );
    await store.put('runs/o/r/step-001-a.png', PNG, 'image/png');
    expect(aws.objects.get('preview-media/runs/o/r/step-001-a.png')).toEqual({
      body: PNG,
      contentType: 'image/png',
    });
    const url = new URL(await store.url('runs/o/r/step-001-a.png', 'ignored'));
    expect(url.pathname).toBe('/preview-media/runs/o/r/step-001-a.png');
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': 'AKIDFAKE/20260101/eu-west-1/s3/aws4_request',
      'X-Amz-Date': '20260101T000000Z',
      'X-Amz-Expires': '3600',
      'X-Amz-SignedHeaders': 'host',
      'X-Amz-Signature': expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // The fake checks no signature, but answers the GET the URL makes.
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer())).toEqual(PNG);
  });

  test('S3MediaReader: without an endpoint, a virtual-hosted URL of the bucket', async () => {
    const store = new S3MediaReader(
      { region: 'eu-west-1', credentials: async () => ({ accessKeyId: 'A', secretAccessKey: 'B' }) },
      'my-media',
      async () => Buffer.from('k'),
      { now: () => T0 },
    );
    const url = new URL(await store.url('runs/o/r/video.mp4', 'ignored'));
    expect(url.origin + url.pathname).toBe('https://my-media.s3.eu-west-1.amazonaws.com/runs/o/r/video.mp4');
  });

  test('S3MediaReader loads its link key once, and again after a failure', async () => {
    let loads = 0;
    const store = new S3MediaReader(fakeTarget(), 'b', async () => {
      loads++;
      if (loads === 1) throw new Error('throttled');
      return Buffer.from('key');
    });
    await expect(store.signLink('/report/x', 60)).rejects.toThrow('throttled');
    await store.signLink('/report/x', 60);
    await store.signLink('/report/y', 60);
    expect(loads).toBe(2);
  });
});
