// biome-ignore-all lint/suspicious/noTemplateCurlyInString: preview.yaml's `${services.<name>.url}` syntax, not JS templates
import { describe, expect, test } from '@jest/globals';
import { PreviewConfigError, parsePreviewConfig } from './preview-config.js';

const app = (env = '') =>
  `apps:\n  api:\n    port: 3000\n    migrate: node migrate.js\n    env:\n      X: "1"${env}\n  web:\n    port: 4000\n    env:\n      DB: \${services.db.url}\n`;

describe('services: in preview.yaml', () => {
  test('the documented example: seedApp defaults to the first app that references the service', () => {
    const config = parsePreviewConfig(
      `services:\n  db:\n    kind: postgres\n    version: "16"\n    from: main\n    seed: node seed.js\n  cache:\n    kind: redis\n    version: 7\n${app()}`,
    );
    expect(config.services).toEqual({
      db: { kind: 'postgres', version: '16', from: 'main', seed: 'node seed.js', seedApp: 'web' },
      cache: { kind: 'redis', version: '7', seedApp: 'api' },
    });
    expect(config.apps.api!.migrate).toBe('node migrate.js');
  });

  test('seedApp as written; no services: none', () => {
    const config = parsePreviewConfig(
      `services:\n  db: { kind: postgres, version: "14", seedApp: api }\n${app()}`,
    );
    expect(config.services!.db!.seedApp).toBe('api');
    expect(parsePreviewConfig('apps:\n  web: { port: 1 }\n').services).toBeUndefined();
  });

  test('every mistake at once: kind, version, from on redis, unknown seedApp, undeclared reference', () => {
    const text = `services:
  db: { kind: mysql, version: "8" }
  old: { kind: postgres, version: "9" }
  cache: { kind: redis, version: "7", from: main, seedApp: nobody }
${app('\n      Q: ${services.queue.url}\n      R: ${services.db.password}')}`;
    let problems: readonly string[] = [];
    try {
      parsePreviewConfig(text);
    } catch (err) {
      expect(err).toBeInstanceOf(PreviewConfigError);
      problems = (err as PreviewConfigError).problems;
    }
    expect([...problems].sort()).toEqual(
      [
        'services.db.kind: must be postgres or redis',
        'services.old.version: postgres 9 is not offered (use one of 14, 15, 16, 17)',
        'services.cache.from: only a postgres service can be copied',
        'services.cache.seedApp: no app "nobody" in apps',
        'apps.api.env.Q: references service queue, which services does not declare',
        'apps.api.env.R: ${services.db.password} is not a reference; use ${services.<name>.url}',
      ].sort(),
    );
  });

  test('a service named like an app, or not a DNS label, is refused', () => {
    expect(() => parsePreviewConfig(`services:\n  web: { kind: redis, version: "7" }\n${app()}`)).toThrow(
      /services\.web: an app is named web too/,
    );
    expect(() =>
      parsePreviewConfig(`services:\n  My_Db: { kind: redis, version: "7" }\napps:\n  web: { port: 1 }\n`),
    ).toThrow(/services\.My_Db: service names must be lower-case DNS labels/);
  });
});
