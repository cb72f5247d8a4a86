import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { LocalMediaStore } from './local-files.js';
import { MEDIA_URL_TTL_SECONDS, type MediaStore } from './port.js';
import { S3MediaStore } from './s3.js';

/*
 * The MediaStore contract, run against every adapter: local files (for real, in a temp dir), and S3
 * through the real SDK client pointed at the loopback AWS fake. Clocks are injected: links are checked
 * at chosen times.
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
const s3Client = () =>
  new S3Client({
    region: 'eu-west-1',
    endpoint: aws.url,
    forcePathStyle: true,
    credentials: { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake-secret' },
  });
mediaContract(
  'S3MediaStore',
  (now) => new S3MediaStore(s3Client(), 'preview-media', async () => Buffer.from('k'.repeat(64)), { now }),
);

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

  test('S3MediaStore: the object lands in the bucket with its type; the URL is a SigV4 presigned GET of 3600 s', async () => {
    const store = new S3MediaStore(s3Client(), 'preview-media', async () => Buffer.from('k'), {
      now: () => T0,
    });
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

  test('S3MediaStore: without an endpoint, a virtual-hosted URL of the bucket', async () => {
    const client = new S3Client({
      region: 'eu-west-1',
      credentials: { accessKeyId: 'A', secretAccessKey: 'B' },
    });
    const store = new S3MediaStore(client, 'my-media', async () => Buffer.from('k'), { now: () => T0 });
    const url = new URL(await store.url('runs/o/r/video.mp4', 'ignored'));
    expect(url.origin + url.pathname).toBe('https://my-media.s3.eu-west-1.amazonaws.com/runs/o/r/video.mp4');
  });

  test('S3MediaStore loads its link key once, and again after a failure', async () => {
    let loads = 0;
    const store = new S3MediaStore(s3Client(), 'b', async () => {
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
