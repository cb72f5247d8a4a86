import { describe, expect, test } from '@jest/globals';
import { configuredEndpoint, withRetries } from './aws-http.js';

describe('configuredEndpoint', () => {
  test("the service's own variable, then the general one, then none; none at all when told to ignore them", () => {
    const env = { AWS_ENDPOINT_URL_S3: 'http://s3.local', AWS_ENDPOINT_URL: 'http://all.local' };
    expect(configuredEndpoint('S3', env)).toBe('http://s3.local');
    expect(configuredEndpoint('LAMBDA', env)).toBe('http://all.local');
    expect(configuredEndpoint('LAMBDA', {})).toBeUndefined();
    expect(configuredEndpoint('S3', { ...env, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'TRUE' })).toBeUndefined();
  });
});

describe('withRetries', () => {
  const flaky = (failures: unknown[]) => {
    let calls = 0;
    return {
      calls: () => calls,
      attempt: async () => {
        const err = failures[calls++];
        if (err) throw err;
        return 'done';
      },
    };
  };
  const waits: number[] = [];
  const opts = { backoffMs: (n: number) => n * 10, sleep: async (ms: number) => void waits.push(ms) };

  test('tries again while the error is retryable, waiting the backoff of each retry', async () => {
    waits.length = 0;
    const f = flaky([new Error('busy'), new Error('busy')]);
    await expect(withRetries(f.attempt, () => true, opts)).resolves.toBe('done');
    expect([f.calls(), waits]).toEqual([3, [10, 20]]);
  });

  test('throws the last error after the attempts, and a non-retryable one at once', async () => {
    waits.length = 0;
    const always = flaky([new Error('1'), new Error('2'), new Error('3'), new Error('4')]);
    await expect(withRetries(always.attempt, () => true, opts)).rejects.toThrow('3');
    expect(always.calls()).toBe(3);
    const fatal = flaky([new Error('denied')]);
    await expect(withRetries(fatal.attempt, (e) => (e as Error).message !== 'denied', opts)).rejects.toThrow(
      'denied',
    );
    expect(fatal.calls()).toBe(1);
  });
});
