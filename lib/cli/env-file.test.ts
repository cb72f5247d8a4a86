import { describe, expect, test } from '@jest/globals';
import { parseEnvFile } from './env-file.js';

const read = (text: string) => parseEnvFile(text, '.env');
const asObject = (text: string) => Object.fromEntries(read(text).map((i) => [i.key, i.value]));

describe('parseEnvFile', () => {
  test('comments: whole lines, and after an unquoted value; a # inside quotes is kept', () => {
    expect(
      read('# app secrets\n\nURL=https://x # prod\nHASH="a # b"\nEMPTY= # none yet\n   # indented comment\n'),
    ).toEqual([
      { key: 'URL', value: 'https://x' },
      { key: 'HASH', value: 'a # b' },
      { key: 'EMPTY', value: '' },
    ]);
  });

  test('a # inside an unquoted value (dotenv would cut the value there) is refused, not cut', () => {
    const message = '.env:2: a # in an unquoted value starts a comment';
    expect(() => read('A=1\nPASSWORD=pa#ss\n')).toThrow(message);
    expect(() => read('A=1\nPASSWORD=#pass\n')).toThrow(message);
    expect(() => read('A=1\nPASSWORD=pa#ss\n')).not.toThrow(/pa#ss/);
    expect(read('PASSWORD="pa#ss"\n')).toEqual([{ key: 'PASSWORD', value: 'pa#ss' }]);
  });

  test('escapes: \\n and \\r in double quotes become the characters; single quotes keep them as written', () => {
    expect(asObject('NL="a\\nb"\nCR="a\\rb"\nSQ=\'a\\nb\'\nBARE=a\\nb\n')).toEqual({
      NL: 'a\nb',
      CR: 'a\rb',
      SQ: 'a\\nb',
      BARE: 'a\\nb',
    });
  });

  test('quotes: single, double and backtick are removed; spaces inside them are kept, around a bare value trimmed', () => {
    expect(asObject('D="s3 cr3t "\nS=\'it is\'\nB=`say "hi"`\nE=\nQ=""\nW=  spaced  \n')).toEqual({
      D: 's3 cr3t ',
      S: 'it is',
      B: 'say "hi"',
      E: '',
      Q: '',
      W: 'spaced',
    });
  });

  test('a quoted value over several lines (a PEM key) is one value, and the lines after it are read', () => {
    const pem =
      '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----';
    expect(read(`BEFORE=1\nKEY="${pem}"\nAFTER=2\n`)).toEqual([
      { key: 'BEFORE', value: '1' },
      { key: 'KEY', value: pem },
      { key: 'AFTER', value: '2' },
    ]);
    expect(asObject(`SINGLE='${pem}'`)).toEqual({ SINGLE: pem });
  });

  test('export prefixes are dropped', () => {
    expect(read('export API_TOKEN="t"\nexport   DB=postgres://x/y?a=b\n')).toEqual([
      { key: 'API_TOKEN', value: 't' },
      { key: 'DB', value: 'postgres://x/y?a=b' },
    ]);
  });

  test('CRLF files read like LF files, a multi-line value included', () => {
    const crlf = 'A=1\r\n# c\r\nB="x y"\r\nPEM="-----BEGIN-----\r\nabc\r\n-----END-----"\r\nC=3\r\n';
    const lf = crlf.replaceAll('\r\n', '\n');
    expect(read(crlf)).toEqual(read(lf));
    expect(asObject(crlf)).toEqual({ A: '1', B: 'x y', PEM: '-----BEGIN-----\nabc\n-----END-----', C: '3' });
  });

  test('a key set twice keeps its last value, in its first place', () => {
    expect(read('A=1\nB=2\nA=3\n')).toEqual([
      { key: 'A', value: '3' },
      { key: 'B', value: '2' },
    ]);
  });

  test('a line dotenv would skip is refused by its number, never quoting its text', () => {
    expect(() => read('GOOD=1\nhunter2\n')).toThrow('.env:2: not a KEY=VALUE line');
    expect(() => read('GOOD=1\nhunter2\n')).not.toThrow(/hunter2/);
    expect(() => read('MY KEY=1\n')).toThrow('.env:1: not a KEY=VALUE line');
    expect(() => read('=value\n')).toThrow('.env:1: not a KEY=VALUE line');
    // After a multi-line value, the count goes on from the right line.
    expect(() => read('A="x\ny"\nB=2\noops\n')).toThrow('.env:4: not a KEY=VALUE line');
  });

  test('a quote never closed is refused by the line that opens it', () => {
    expect(() => read('A=1\nKEY="-----BEGIN-----\nabc\n')).toThrow(
      '.env:2: the quoted value is never closed',
    );
    expect(() => read('KEY="abc\\"\n')).toThrow('.env:1: the quoted value is never closed');
  });
});
