import { describe, expect, test } from '@jest/globals';
import { parsePreviewConfig } from '../../functions/core/preview-config.js';

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
    ).toThrow(/^preview\.yaml: apps\.web\.buildArgs\["bad name"\]: Invalid key in record/);
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
});
