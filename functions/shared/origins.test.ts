import { describe, expect, test } from '@jest/globals';
import { parseAllowedOrigins } from '../core/applications/applications.js';
import { previewCookies } from '../core/runs/execution/provision.js';
import { navigateTarget, StepFailure, targetOrigins } from '../core/runs/execution/steps.js';
import { ValidationError } from './errors.js';
import { isLocalHost, originAllowed, originLabel, parseAllowedOrigin, runOrigins } from './origins.js';

/* What a run's browser may load, as plain rules (the browser enforcing them: the Browser contract). */

const target = {
  url: 'http://127.0.0.1:4101/start',
  appUrl: 'http://127.0.0.1:4101',
  urls: { web: 'http://127.0.0.1:4101', api: 'http://127.0.0.1:4102' },
  origins: runOrigins(['http://127.0.0.1:4101', 'http://127.0.0.1:4102'], ['https://login.example.com']),
};

describe('origins a run may load', () => {
  test('the app URLs and the allowed origins, by exact origin', () => {
    expect(target.origins).toEqual([
      'http://127.0.0.1:4101',
      'http://127.0.0.1:4102',
      'https://login.example.com',
    ]);
    const ok = (u: string) => originAllowed(u, target.origins);
    expect(ok('http://127.0.0.1:4101/a?b')).toBe(true);
    expect(ok('ws://127.0.0.1:4102/socket')).toBe(true);
    expect(ok('https://login.example.com/authorize')).toBe(true);
    expect(ok('blob:http://127.0.0.1:4101/6c1f')).toBe(true);
    for (const refused of [
      'http://127.0.0.1:4200/openapi.json', // another port on loopback: the control plane
      'https://127.0.0.1:4101/', // another scheme
      'http://localhost:4101/',
      'http://login.example.com/',
      'wss://127.0.0.1:4200/',
      'file:///srv/data/credentials.json',
      'chrome://version',
      'view-source:http://127.0.0.1:4101/',
      'data:text/html,<h1>x</h1>',
      'javascript:alert(1)',
      'http://169.254.169.254/latest/meta-data/',
      'http://127.0.0.1:9001/2018-06-01/runtime/invocation/next',
      'not a url',
    ])
      expect([refused, ok(refused)]).toEqual([refused, false]);
  });

  test('a target prepared before origins were recorded gets its app URLs only', () => {
    expect(targetOrigins({ appUrl: target.appUrl, urls: target.urls })).toEqual([
      'http://127.0.0.1:4101',
      'http://127.0.0.1:4102',
    ]);
  });

  test('a stored allowed origin that breaks the rules is dropped, not trusted', () => {
    expect(
      runOrigins(['http://127.0.0.1:1'], ['http://169.254.169.254', 'https://cdn.example.com/']),
    ).toEqual(['http://127.0.0.1:1', 'https://cdn.example.com']);
  });

  test('messages name the scheme and host only', () => {
    expect(originLabel('http://127.0.0.1:4200/openapi.json?token=x')).toBe('http://127.0.0.1:4200');
    expect(originLabel('file:///srv/data/credentials.json')).toBe('file://');
    expect(originLabel('data:text/html,secret')).toBe('data:');
  });
});

describe('a navigate step', () => {
  test('resolves against the app URL and stays on an allowed origin after variables are substituted', () => {
    expect(navigateTarget('/form', {}, target)).toBe('http://127.0.0.1:4101/form');
    expect(navigateTarget('{{variable:U}}', { U: 'http://127.0.0.1:4102/x' }, target)).toBe(
      'http://127.0.0.1:4102/x',
    );
    const refused = (url: string, variables: Record<string, string> = {}) => {
      try {
        navigateTarget(url, variables, target);
        return 'opened';
      } catch (err) {
        expect(err).toBeInstanceOf(StepFailure);
        return (err as Error).message;
      }
    };
    // The //host trick: "/{{variable:P}}" with P=/127.0.0.1:4200/… is a scheme-relative URL.
    expect(refused('/{{variable:P}}', { P: '/127.0.0.1:4200/openapi.json' })).toBe(
      'navigation to http://127.0.0.1:4200 is not allowed for this run',
    );
    expect(refused('{{variable:U}}', { U: 'file:///srv/data/credentials.json' })).toBe(
      'navigation to file:// is not allowed for this run',
    );
    expect(refused('\\\\127.0.0.1:4200/')).toBe(
      'navigation to http://127.0.0.1:4200 is not allowed for this run',
    );
    expect(refused('javascript:fetch("/")')).toBe('navigation to javascript: is not allowed for this run');
    expect(refused('http://[::ffff:169.254.169.254]/')).toBe(
      'navigation to http://[::ffff:a9fe:a9fe] is not allowed for this run',
    );
  });
});

describe("an application's allowed origins", () => {
  test('http(s) origins only, normalized, sorted, without duplicates', () => {
    expect(
      parseAllowedOrigins([
        'https://Login.Example.com/',
        'https://cdn.example.com:443',
        ' https://login.example.com ',
        '',
      ]),
    ).toEqual(['https://cdn.example.com', 'https://login.example.com']);
  });

  test('refused: paths, other schemes, credentials, loopback, link-local, the service itself', () => {
    const cases: [string, RegExp][] = [
      ['https://login.example.com/callback', /not an origin/],
      ['https://login.example.com?x=1', /not an origin/],
      ['ftp://files.example.com', /not an http: or https: origin/],
      ['file:///etc', /not an http: or https: origin/],
      ['https://user:pw@login.example.com', /credentials/],
      ['login.example.com', /not a URL/],
      ['http://127.0.0.1:4200', /loopback or link-local/],
      ['http://localhost:3000', /loopback or link-local/],
      ['http://app.localhost', /loopback or link-local/],
      ['http://[::1]:80', /loopback or link-local/],
      ['http://0.0.0.0:80', /loopback or link-local/],
      ['http://169.254.169.254', /loopback or link-local/],
      ['http://[fe80::1]', /loopback or link-local/],
      ['http://2130706433', /loopback or link-local/], // 127.0.0.1 as a number
      ['https://abc123.execute-api.eu-west-1.amazonaws.com', /where the service itself answers/],
    ];
    for (const [origin, message] of cases) {
      expect(parseAllowedOrigin(origin)).toBeInstanceOf(Error);
      expect(() => parseAllowedOrigins([origin])).toThrow(ValidationError);
      expect(() => parseAllowedOrigins([origin])).toThrow(message);
    }
    expect(() =>
      parseAllowedOrigins(Array.from({ length: 21 }, (_, i) => `https://h${i}.example.com`)),
    ).toThrow('allowedOrigins: at most 20 origins (21 given)');
  });

  test('isLocalHost: loopback, link-local and unspecified in every form the URL parser writes', () => {
    for (const host of [
      '127.0.0.1',
      '127.1.2.3',
      '[::1]',
      '[::ffff:7f00:1]',
      '169.254.170.2',
      '0.0.0.0',
      'LOCALHOST',
    ])
      expect([host, isLocalHost(host)]).toEqual([host, true]);
    for (const host of ['10.0.0.1', '192.168.1.1', 'example.com', '[2001:db8::1]', '128.0.0.1'])
      expect([host, isLocalHost(host)]).toEqual([host, false]);
  });
});

describe("a scenario's cookies", () => {
  test("apply only to the preview's hosts", () => {
    const cookies = [
      { name: 'a', value: '1' },
      { name: 'b', value: '2', domain: '.127.0.0.1' },
    ];
    expect(previewCookies(cookies, target)).toBe(cookies);
    expect(() => previewCookies([{ name: 'sid', value: 'x', domain: '.example.com' }], target)).toThrow(
      `the factory's cookie "sid" is for example.com, not a host of this run's preview (127.0.0.1)`,
    );
  });
});
