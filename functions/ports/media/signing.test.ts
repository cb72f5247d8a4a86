import { S3Client } from '@aws-sdk/client-s3';
import { describe, expect, test } from '@jest/globals';
import { S3MediaReader } from './s3.js';
import { checkSignedQuery, KeyLinkSigner } from './signing.js';

/*
 * The link signer of the functions that bring the merge gate: the same report links the media reader
 * signs (and the report route checks), from the link key alone, loaded once.
 */
const KEY = Buffer.from('k'.repeat(32));
const NOW = Date.parse('2030-01-01T00:00:00Z');

describe('KeyLinkSigner', () => {
  test('signs the report link the media reader signs, which the link check accepts until it expires', async () => {
    let loads = 0;
    const signer = new KeyLinkSigner(
      async () => {
        loads++;
        return KEY;
      },
      () => NOW,
    );
    const reader = new S3MediaReader(new S3Client({ region: 'eu-west-1' }), 'b', async () => KEY, {
      now: () => NOW,
    });
    const query = await signer.signLink('/report/run-1', 60);
    expect(query).toBe(await reader.signLink('/report/run-1', 60));
    const params = new URLSearchParams(query);
    const check = (path: string, at: number) =>
      checkSignedQuery(KEY, path, params.get('expires') ?? undefined, params.get('sig') ?? undefined, at);
    expect(check('/report/run-1', NOW)).toBe('ok');
    expect(check('/report/run-2', NOW)).toBe('forbidden');
    expect(check('/report/run-1', NOW + 61_000)).toBe('expired');
    await signer.signLink('/report/run-2', 60);
    expect(loads).toBe(1);
  });

  test('a key that could not be loaded is loaded again on the next link', async () => {
    let loads = 0;
    const signer = new KeyLinkSigner(async () => {
      if (++loads === 1) throw new Error('AccessDenied');
      return KEY;
    });
    await expect(signer.signLink('/report/run-1', 60)).rejects.toThrow('AccessDenied');
    await expect(signer.signLink('/report/run-1', 60)).resolves.toMatch(/^expires=\d+&sig=[\w-]+$/);
    expect(loads).toBe(2);
  });
});
