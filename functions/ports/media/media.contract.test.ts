import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { canonicalQuery, sigv4Signature } from '../../../test/support/sigv4.js';
import { LocalMediaStore } from './local-files.js';
import { MEDIA_URL_TTL_SECONDS, type MediaStore } from './port.js';
import { S3MediaReader } from './s3.js';
import { S3MediaWriter } from './s3-writer.js';

/*
 * The MediaStore contract, run against every adapter: local files (for real, in a temp dir), and S3 (the
 * reader and the writer together, through a real S3Client) pointed at the loopback AWS fake. Clocks are
 * injected: links are checked at chosen times. The S3 reader's presigned URLs (the SDK's presigner) have
 * their SigV4 signature recomputed by hand, and the writer's uploads are checked at the SDK boundary
 * (aws-sdk-client-mock) as well as against the fake.
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
/** An S3 client as a Lambda's (region, credentials), pointed at `endpoint` (default: the fake). */
const client = (
  opts: { endpoint?: string | null; credentials?: typeof CREDENTIALS & { sessionToken?: string } } = {},
) =>
  new S3Client({
    region: 'eu-west-1',
    credentials: opts.credentials ?? CREDENTIALS,
    ...(opts.endpoint === null ? {} : { endpoint: opts.endpoint ?? aws.url }),
  });

/** Both S3 halves over one bucket, as one MediaStore (in AWS they are separate adapters). */
function s3Media(
  bucket: string,
  loadLinkKey: () => Promise<Buffer>,
  now: () => number = Date.now,
  s3: S3Client = client(),
): MediaStore & { reader: S3MediaReader } {
  const reader = new S3MediaReader(s3, bucket, loadLinkKey, { now });
  const writer = new S3MediaWriter(s3, bucket);
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

/** The signature a presigned GET URL must carry (SigV4 by hand, test/support/sigv4.ts). */
function expectedSignature(url: URL, secretAccessKey: string, region: string): string {
  const canonicalRequest = [
    'GET',
    // S3 signs the path as sent (no second encoding, unlike the other services).
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

describe('S3MediaReader presigns GET URLs valid for an hour from its clock', () => {
  const keys = ['runs/o/r/step-001-a.png', 'runs/org 1/r/vidéo (1).mp4', 'runs/o/r/a+b=c&d~e!.webm'];
  const cases: {
    name: string;
    endpoint?: string;
    credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
    origin: string;
    prefix: string;
  }[] = [
    {
      name: 'AWS, virtual-hosted',
      credentials: CREDENTIALS,
      origin: 'https://my-media.s3.eu-west-1.amazonaws.com',
      prefix: '/',
    },
    {
      name: 'AWS, virtual-hosted, with a session token',
      credentials: { ...CREDENTIALS, sessionToken: 'IQoJb3JpZ2luX2VjE/token+with=chars' },
      origin: 'https://my-media.s3.eu-west-1.amazonaws.com',
      prefix: '/',
    },
    {
      // An IP endpoint (the cloud tier's fake, an S3-compatible store on an address) is path-style.
      name: 'a custom endpoint on an IP address, path-style',
      endpoint: 'http://127.0.0.1:4566',
      credentials: CREDENTIALS,
      origin: 'http://127.0.0.1:4566',
      prefix: '/my-media/',
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const region = 'eu-west-1';
      const reader = new S3MediaReader(
        client({ endpoint: c.endpoint ?? null, credentials: c.credentials }),
        'my-media',
        async () => Buffer.from('k'),
        { now: () => T0 + 1234 },
      );
      for (const key of keys) {
        const url = new URL(await reader.url(key, 'ignored'));
        expect(url.origin).toBe(c.origin);
        expect(decodeURIComponent(url.pathname)).toBe(c.prefix + key);
        expect(url.searchParams.get('X-Amz-Date')).toBe('20260101T000001Z');
        expect(url.searchParams.get('X-Amz-Expires')).toBe(String(MEDIA_URL_TTL_SECONDS));
        expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('host');
        expect(url.searchParams.get('X-Amz-Credential')).toBe(
          `${c.credentials.accessKeyId}/20260101/${region}/s3/aws4_request`,
        );
        expect(url.searchParams.get('X-Amz-Security-Token')).toBe(c.credentials.sessionToken ?? null);
        expect(url.searchParams.get('X-Amz-Signature')).toBe(
          expectedSignature(url, c.credentials.secretAccessKey, region),
        );
      }
    });
  }
});

describe('S3MediaWriter at the SDK boundary', () => {
  const s3 = new S3Client({ region: 'eu-west-1', credentials: CREDENTIALS });
  const mock = mockClient(s3);
  afterEach(() => {
    mock.reset();
  });

  test('a screenshot is one PutObject of its bytes, with its content type', async () => {
    mock.on(PutObjectCommand).resolves({ ETag: '"e"' });
    await new S3MediaWriter(s3, 'preview-media').put('runs/o/r/step-001-a.png', PNG, 'image/png');
    const calls = mock.commandCalls(PutObjectCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.args[0].input).toMatchObject({
      Bucket: 'preview-media',
      Key: 'runs/o/r/step-001-a.png',
      ContentType: 'image/png',
    });
    expect(Buffer.from(calls[0]!.args[0].input.Body as Uint8Array)).toEqual(PNG);
    expect(mock.commandCalls(CreateMultipartUploadCommand)).toHaveLength(0);
  });

  test('a refused PutObject is the caller’s error', async () => {
    mock.on(PutObjectCommand).rejects(Object.assign(new Error('Access Denied'), { name: 'AccessDenied' }));
    await expect(
      new S3MediaWriter(s3, 'preview-media').put('runs/o/r/a.png', PNG, 'image/png'),
    ).rejects.toMatchObject({ name: 'AccessDenied' });
  });

  test('a video longer than a part goes up in 5 MiB parts; a failed part aborts the upload', async () => {
    mock.on(CreateMultipartUploadCommand).resolves({ UploadId: 'u1' });
    mock.on(UploadPartCommand).resolves({ ETag: '"p"' });
    mock.on(UploadPartCommand, { PartNumber: 2 }).rejects(new Error('connection reset'));
    mock.on(AbortMultipartUploadCommand).resolves({});
    const video = Buffer.alloc(11 * 1024 * 1024, 7);
    await expect(
      new S3MediaWriter(s3, 'preview-media').put('runs/o/r/video.webm', video, 'video/webm'),
    ).rejects.toThrow('connection reset');
    expect(mock.commandCalls(CreateMultipartUploadCommand)[0]!.args[0].input).toMatchObject({
      Bucket: 'preview-media',
      Key: 'runs/o/r/video.webm',
      ContentType: 'video/webm',
    });
    expect(mock.commandCalls(AbortMultipartUploadCommand).map((c) => c.args[0].input)).toEqual([
      { Bucket: 'preview-media', Key: 'runs/o/r/video.webm', UploadId: 'u1' },
    ]);
    expect(mock.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
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

  test('S3 media: a video longer than a part is reassembled byte for byte, and its URL opens it', async () => {
    const store = s3Media('preview-media', async () => Buffer.from('k'));
    const video = Buffer.alloc(6 * 1024 * 1024 + 99);
    for (let i = 0; i < video.length; i++) video[i] = (i * 31) % 256;
    const before = aws.calls.length;
    await store.put('runs/o/r/video.webm', video, 'video/webm');
    // Create, two parts (5 MiB and the rest), complete.
    expect(aws.calls.slice(before)).toEqual([
      'S3.POST /preview-media/runs/o/r/video.webm',
      'S3.PUT /preview-media/runs/o/r/video.webm',
      'S3.PUT /preview-media/runs/o/r/video.webm',
      'S3.POST /preview-media/runs/o/r/video.webm',
    ]);
    expect(aws.uploads.size).toBe(0);
    const res = await fetch(await store.url('runs/o/r/video.webm', 'ignored'));
    expect(res.headers.get('content-type')).toBe('video/webm');
    expect(Buffer.from(await res.arrayBuffer()).equals(video)).toBe(true);
  });

  test('S3MediaReader: without an endpoint, a virtual-hosted URL of the bucket', async () => {
    const store = new S3MediaReader(client({ endpoint: null }), 'my-media', async () => Buffer.from('k'), {
      now: () => T0,
    });
    const url = new URL(await store.url('runs/o/r/video.mp4', 'ignored'));
    expect(url.origin + url.pathname).toBe('https://my-media.s3.eu-west-1.amazonaws.com/runs/o/r/video.mp4');
  });

  test('S3MediaReader loads its link key once, and again after a failure', async () => {
    let loads = 0;
    const store = new S3MediaReader(client(), 'b', async () => {
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
