import { describe, expect, test } from '@jest/globals';
import { MASK, maskedForms, maskSecrets } from './mask.js';

const PEM = [
  '-----BEGIN PRIVATE KEY-----',
  'MIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEAq7BFUpkGp3+XQxyz',
  'dSkDnvmcp9lC3oSJ6nvO6WcwJRm4Vn5hY9cDy0Hdq2qOAP3Y7r2q8sY8mK6kbw1+',
  'vZ8JbQIDAQABAkBGt6Nq0qZV3VjH9lJeOmg0nJVCx9d6b3HqT8y1jS2c5k0JcS0d',
  '-----END PRIVATE KEY-----',
].join('\n');

describe('maskSecrets', () => {
  test('masks a value wherever it occurs, leaving the rest as it was', () => {
    expect(maskSecrets('user=admin pass=hunter22 again hunter22.', ['hunter22'])).toBe(
      `user=admin pass=${MASK} again ${MASK}.`,
    );
    expect(maskSecrets('nothing here', ['hunter22'])).toBe('nothing here');
    expect(maskSecrets('', ['hunter22'])).toBe('');
    expect(maskSecrets('hunter22', [])).toBe('hunter22');
  });

  test('a multi-line value printed whole is masked whole, before any splitting', () => {
    const out = `starting\n${PEM}\ncrashed`;
    expect(maskSecrets(out, [PEM])).toBe(`starting\n${MASK}\ncrashed`);
  });

  test('the lines of a multi-line value are masked on their own (a partial print)', () => {
    const lines = PEM.split('\n');
    const partial = `key tail:\n${lines.slice(2).join('\n')}\nend`;
    const masked = maskSecrets(partial, [PEM]);
    for (const line of lines) expect(masked).not.toContain(line);
    expect(masked).toContain('key tail:');
    // With CRLF line ends too.
    const crlf = PEM.split('\n').join('\r\n');
    expect(maskSecrets(lines[1]!, [crlf])).toBe(MASK);
  });

  test.each([
    ['JSON-escaped', (v: string) => JSON.stringify({ key: v })],
    ['URL-encoded', (v: string) => `https://x.test/?key=${encodeURIComponent(v)}`],
    ['base64', (v: string) => `Authorization: Basic ${Buffer.from(v).toString('base64')}`],
    ['base64 without padding', (v: string) => Buffer.from(v).toString('base64').replace(/=+$/, '')],
    ['base64url', (v: string) => `token=${Buffer.from(v).toString('base64url')}`],
  ])('masks the %s form', (_name, encode) => {
    for (const value of [PEM, 'p@ss w/rd+"quoted"\\', 'postgres://admin:hunter2@db:5432/app?ssl=1']) {
      const out = encode(value);
      const masked = maskSecrets(out, [value]);
      expect(masked).toContain(MASK);
      expect(masked).not.toContain(value);
      for (const form of maskedForms(value)) expect(masked).not.toContain(form);
    }
  });

  test('longest value first: a value containing another is masked whole', () => {
    expect(maskSecrets('token abcd-efgh-ijkl', ['efgh', 'abcd-efgh-ijkl'])).toBe(`token ${MASK}`);
    // And the other order in the input list gives the same.
    expect(maskSecrets('token abcd-efgh-ijkl', ['abcd-efgh-ijkl', 'efgh'])).toBe(`token ${MASK}`);
  });

  test('a value is never matched inside a mask written for another one', () => {
    expect(maskSecrets('x verysecretvalue y', ['verysecretvalue', 'secret', 'ecre'])).toBe(`x ${MASK} y`);
  });

  test('values shorter than 4 characters are not masked (they would blank out ordinary output)', () => {
    expect(maskSecrets('port 1 on, debug 1', ['1', 'on', 'abc'])).toBe('port 1 on, debug 1');
    expect(maskSecrets('code abcd', ['abcd'])).toBe(`code ${MASK}`);
  });

  test('text that already holds the private-use placeholder characters is left intact', () => {
    const odd = '\uE000 hunter22 \uE001';
    expect(maskSecrets(odd, ['hunter22'])).toBe(`\uE000 ${MASK} \uE001`);
  });

  test('regex metacharacters in a value are taken literally', () => {
    expect(maskSecrets('a.*b(c)[d]$ and a-b', ['a.*b(c)[d]$'])).toBe(`${MASK} and a-b`);
  });
});
