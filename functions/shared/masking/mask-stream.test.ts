import { describe, expect, test } from '@jest/globals';
import { MASK, maskedForms, maskSecrets } from './mask.js';
import { MaskingWriter } from './mask-stream.js';

const SECRET = 'hunter2-db-pass/with+chars';
const PEM = '-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----';

/** Everything a writer wrote for `chunks` pushed one by one, and what it had written before `end`. */
function run(values: string[], chunks: (string | Buffer)[]) {
  const written: string[] = [];
  const writer = new MaskingWriter(values, (t) => written.push(t));
  for (const c of chunks) writer.push(c);
  const beforeEnd = written.join('');
  writer.end();
  return { text: written.join(''), beforeEnd };
}

/** `text` cut into pieces at every offset in `at`. */
const split = (text: string, at: number[]) =>
  [0, ...at, text.length].slice(1).map((end, i, ends) => text.slice(i === 0 ? 0 : ends[i - 1], end));

describe('MaskingWriter', () => {
  test('a value in one chunk is masked, the rest written as it is', () => {
    expect(run([SECRET], [`db=${SECRET} ok\n`]).text).toBe('db=[secret] ok\n');
  });

  test.each(maskedForms(SECRET).map((f) => [f]))(
    'a value split anywhere is never written (form %s)',
    (form) => {
      const line = `connecting with ${form} now\n`;
      const start = line.indexOf(form);
      for (let i = start; i <= start + form.length; i++) {
        const { text } = run([SECRET], split(line, [i]));
        expect(text).toBe('connecting with [secret] now\n');
      }
    },
  );

  test('a value split into single characters, and split across many chunks', () => {
    const line = `x${SECRET}y\n`;
    expect(run([SECRET], [...line]).text).toBe('x[secret]y\n');
    expect(run([SECRET], split(line, [3, 9, 14, 20])).text).toBe('x[secret]y\n');
  });

  test('a multi-line value split at a line break, and a UTF-8 character split between buffers', () => {
    const line = `key: ${PEM}\n`;
    expect(run([PEM], split(line, [line.indexOf('\n') + 1])).text).toBe('key: [secret]\n');
    const bytes = Buffer.from('pass: ünïcødé-sécret!\n');
    const pieces = [bytes.subarray(0, 8), bytes.subarray(8, 9), bytes.subarray(9)];
    expect(run(['ünïcødé-sécret!'], pieces).text).toBe('pass: [secret]\n');
  });

  test('text that cannot become a value is written at once; only a possible beginning waits', () => {
    expect(run([SECRET], ['listening on 3000\n']).beforeEnd).toBe('listening on 3000\n');
    const partial = run([SECRET], ['value: hunter2-']);
    expect(partial.beforeEnd).toBe('value: ');
    // The stream ended before the value did: what waited is written.
    expect(partial.text).toBe('value: hunter2-');
  });

  test('values that overlap: every split writes what masking the whole text at once gives', () => {
    // `abcd1234` is complete in the first chunk, but the chunk's end `1234x` begins the second value.
    const values = ['abcd1234', '1234xyz9'];
    const line = '> abcd1234xyz9 < 1234xyz9abcd1234\n';
    for (let i = 0; i <= line.length; i++)
      for (let j = i; j <= line.length; j++)
        expect(run(values, split(line, [i, j])).text).toBe(maskSecrets(line, values));
  });

  test('the longest value a bundle takes (65,536 characters), split between chunks after 128 KB of output', () => {
    const long = Array.from({ length: 65_536 }, (_, i) => String.fromCharCode(33 + ((i * 7919) % 90))).join(
      '',
    );
    const filler = 'x'.repeat(65_536);
    const { text } = run([long], [filler, filler, `a ${long.slice(0, 30_000)}`, `${long.slice(30_000)} b\n`]);
    expect(text).toBe(`${filler}${filler}a ${MASK} b\n`);
  }, 30_000);

  test('without values, everything passes through unchanged', () => {
    expect(run([], ['a', 'b\n']).text).toBe('ab\n');
  });
});
