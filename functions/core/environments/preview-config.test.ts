import { describe, expect, test } from '@jest/globals';
import { listProblems, reservedMemberPaths } from '../../shared/validation.js';
import { PreviewConfigError, parsePreviewConfig } from './preview-config.js';

describe('parsePreviewConfig', () => {
  test('the documented example', () => {
    const config = parsePreviewConfig(`
apps:
  web:
    port: 3000
    command: node server.js
    build: npm ci
    health: /healthz
    env: { GREETING: hi, RETRIES: 3 }
    dockerfile: Dockerfile
    context: .
  api:
    port: 4000
`);
    expect(Object.keys(config.apps)).toEqual(['web', 'api']);
    expect(config.apps.web!.env).toEqual({ GREETING: 'hi', RETRIES: '3' });
  });

  test('buildArgs: names as environment variables, values as text (part of the build identity)', () => {
    const config = parsePreviewConfig(
      'apps:\n  web:\n    port: 3000\n    buildArgs: { NODE_ENV: production, LEVEL: 2 }\n',
    );
    expect(config.apps.web!.buildArgs).toEqual({ NODE_ENV: 'production', LEVEL: '2' });
    expect(() =>
      parsePreviewConfig('apps:\n  web:\n    port: 3000\n    buildArgs: { "bad name": x }\n'),
    ).toThrow(
      /^preview\.yaml: apps\.web\.buildArgs\["bad name"\]: must be a build argument name \(letters, digits, _\)/,
    );
  });

  test("YAML 1.2's core schema: dates and yes/no stay strings, 0o17 is octal, comments-only is empty", () => {
    const config = parsePreviewConfig(
      'apps:\n  web:\n    port: 0o17\n    env: { SINCE: 2024-01-01, OK: yes }\n',
    );
    expect(config.apps.web).toMatchObject({ port: 15, env: { SINCE: '2024-01-01', OK: 'yes' } });
    expect(() => parsePreviewConfig('# nothing yet\n')).toThrow(
      /^preview\.yaml: Invalid input: expected object/,
    );
  });

  test.each([
    ['apps: [', /^preview\.yaml is not valid YAML: /],
    ['apps: {}\n---\napps: {}', /^preview\.yaml is not valid YAML: expected a single document/],
    [
      'apps:\n  web: { port: 1 }\n  web: { port: 2 }',
      /^preview\.yaml is not valid YAML: duplicated mapping key/,
    ],
    ['apps:\n  web: { port: !!binary aGk= }', /^preview\.yaml is not valid YAML: unknown scalar tag/],
    ['', /^preview\.yaml: Invalid input: expected object/],
    ['apps: {}', /^preview\.yaml: apps: declare at least one app/],
    ['apps:\n  web:\n    port: "3000"', /^preview\.yaml: apps\.web\.port: /],
    [
      'apps:\n  Web_App:\n    port: 3000',
      /^preview\.yaml: apps\.Web_App: app names must be lower-case DNS labels/,
    ],
    ['apps:\n  web:\n    port: 3000\n    helth: /x', /^preview\.yaml: apps\.web: .*helth/],
    [
      'apps:\n  web:\n    port: 3000\n    health: healthz',
      /^preview\.yaml: apps\.web\.health: must be a path/,
    ],
    [
      'apps:\n  web:\n    port: 3000\n    env: { __proto__: x }',
      /^preview\.yaml: apps\.web\.env\.__proto__: must not be __proto__/,
    ],
    ['apps:\n  web:\n    port: 3000\n    env: { 1BAD: x }', /^preview\.yaml: apps\.web\.env\["1BAD"\]: /],
  ])('%j is rejected saying what and where', (text, message) => {
    expect(() => parsePreviewConfig(text)).toThrow(message);
  });

  test('a file with four mistakes: all four in one answer, each with its path, and where it was read', () => {
    const text = [
      'apps:',
      '  Web_App:', //                     1: not a DNS label
      '    port: 3000',
      '    comand: node server.js', //     2: a typo
      '  api:',
      '    port: "8000"', //               3: a string
      '    health: healthz', //            4: not a path
      'factory: { app: api }',
      '',
    ].join('\n');
    let error: unknown;
    try {
      parsePreviewConfig(text);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PreviewConfigError);
    const problems = [...(error as PreviewConfigError).problems].sort();
    expect(problems).toEqual([
      'apps.Web_App: Unrecognized key: "comand"',
      'apps.Web_App: app names must be lower-case DNS labels',
      'apps.api.health: must be a path starting with /',
      'apps.api.port: Invalid input: expected number, received string',
    ]);
    const described = (error as PreviewConfigError).describe('acme/web@4f0c1e2a9b3d');
    expect(described).toMatch(/^preview\.yaml has 4 problems \(in acme\/web@4f0c1e2a9b3d\): /);
    for (const p of problems) expect(described).toContain(p);
  });

  test('the cross-field checks and reserved keys are told beside the fields that failed', () => {
    const text =
      'apps:\n  web:\n    port: 0\n    env: { __proto__: x, 1BAD: y }\nfactory: { app: nope }\nextra: 1\n';
    expect(() => parsePreviewConfig(text)).toThrow(
      new PreviewConfigError([
        'apps.web.env.__proto__: must not be __proto__',
        'apps.web.port: Too small: expected number to be >=1',
        'apps.web.env["1BAD"]: must be an environment variable name',
        'Unrecognized key: "extra"',
        'factory.app: no app "nope" in apps',
      ]),
    );
  });

  test('sibling references are checked with the rest: an undeclared app beside other mistakes', () => {
    const ref = (inner: string) => `\${${inner}}`;
    const text =
      'apps:\n  web:\n    port: "3000"\n    comand: node web.js\n    env:\n' +
      '      API_URL: ' +
      ref('apps.backend.url') +
      '/v1\n      SELF: ' +
      ref('apps.web.internalUrl') +
      '\n' +
      '      BAD: ' +
      ref('apps.web.port') +
      '\n';
    expect(() => parsePreviewConfig(text)).toThrow(
      new PreviewConfigError([
        'apps.web.port: Invalid input: expected number, received string',
        'apps.web: Unrecognized key: "comand"',
        'apps.web.env.API_URL: references app backend, which preview.yaml does not declare',
        'apps.web.env.BAD: ' +
          ref('apps.web.port') +
          ' is not a reference; use ' +
          ref('apps.<name>.url') +
          ' or ' +
          ref('apps.<name>.internalUrl') +
          '',
      ]),
    );
    // Alone, the reference is still told, in the one-line form.
    expect(() =>
      parsePreviewConfig('apps:\n  web:\n    port: 3000\n    env: { U: "' + ref('apps.api.url') + '" }\n'),
    ).toThrow('preview.yaml: apps.web.env.U: references app api, which preview.yaml does not declare');
    // Declared references pass.
    expect(
      parsePreviewConfig(
        'apps:\n  web:\n    port: 3000\n    env: { U: "' +
          ref('apps.api.url') +
          '" }\n  api:\n    port: 3001\n',
      ).apps.web!.env,
    ).toEqual({ U: ref('apps.api.url') + '' });
  });

  test('one problem keeps the one-line form; many stay within a status error', () => {
    expect(new PreviewConfigError(['apps.web: x']).describe('a/b@1')).toBe(
      'preview.yaml: apps.web: x (in a/b@1)',
    );
    const many = Array.from({ length: 200 }, (_, i) => `apps.app${i}.port: Invalid input: expected number`);
    const text = new PreviewConfigError(many).describe('acme/web@4f0c1e2a9b3d');
    expect(text.length).toBeLessThanOrEqual(1000);
    expect(text).toMatch(/^preview\.yaml has 200 problems \(in acme\/web@4f0c1e2a9b3d\): apps\.app0\.port: /);
    expect(text).toMatch(/; … and \d+ more$/);
    const listed = text.split('; ').length - 1; // the problems shown, besides the count
    expect(text.endsWith(`and ${200 - listed} more`)).toBe(true);
  });
});

describe('listProblems and reservedMemberPaths', () => {
  test('every problem when they fit, a count of the rest when not, none cut', () => {
    expect(listProblems(['a: x', 'b: y'])).toBe('a: x; b: y');
    expect(listProblems(['a'.repeat(50), 'b'.repeat(50), 'c'.repeat(50)], 80)).toBe(
      `${'a'.repeat(50)}; … and 2 more`,
    );
    expect(listProblems(['x'.repeat(1000)])).toBe(`${'x'.repeat(299)}…`);
  });
  test('every __proto__ member, in document order', () => {
    const doc = JSON.parse('{"a":{"__proto__":1},"b":[{"c":{"__proto__":2}}],"__proto__":3}');
    expect(reservedMemberPaths(doc)).toEqual([['__proto__'], ['a', '__proto__'], ['b', 0, 'c', '__proto__']]);
    expect(reservedMemberPaths(doc, 1)).toEqual([['__proto__']]);
  });
});
