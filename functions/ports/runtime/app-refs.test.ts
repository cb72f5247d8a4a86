// biome-ignore-all lint/suspicious/noTemplateCurlyInString: preview.yaml's `${apps.<name>.url}` syntax, not JS templates
import { describe, expect, test } from '@jest/globals';
import { referencedApps, resolveAppRefs, resolveServiceRefs } from './app-refs.js';

const addresses = {
  api: { url: 'https://api.example.test', internalUrl: 'http://api.ns.svc.cluster.local' },
  web: { url: 'https://web.example.test', internalUrl: 'http://web.ns.svc.cluster.local' },
};
const launch = (vars: Record<string, string>, secretKeys: string[] = []) => ({
  name: 'web',
  spec: { port: 3000 },
  vars,
  secretKeys,
});

describe('resolveAppRefs', () => {
  test('replaces url and internalUrl references, several in one value, leaving other text', () => {
    const out = resolveAppRefs(
      launch({ A: '${apps.api.internalUrl}/v1', B: '${apps.api.url},${apps.web.url}', C: 'plain $HOME' }),
      addresses,
    );
    expect(out.vars).toEqual({
      A: 'http://api.ns.svc.cluster.local/v1',
      B: 'https://api.example.test,https://web.example.test',
      C: 'plain $HOME',
    });
  });

  test('an unknown app fails naming the app and the variable', () => {
    expect(() => resolveAppRefs(launch({ API_URL: '${apps.backend.url}' }), addresses)).toThrow(
      'app web: env API_URL references app backend, which preview.yaml does not declare',
    );
  });

  test('an unknown field fails, saying what is allowed', () => {
    expect(() => resolveAppRefs(launch({ X: '${apps.api.port}' }), addresses)).toThrow(
      /env X: \$\{apps\.api\.port\} is not a reference/,
    );
  });

  test('secret values are left alone, and not counted as references', () => {
    const l = launch({ TOKEN: '${apps.nope.url}', A: '${apps.api.url}' }, ['TOKEN']);
    expect(resolveAppRefs(l, addresses).vars.TOKEN).toBe('${apps.nope.url}');
    expect(referencedApps(l)).toEqual(['api']);
  });
});

describe('resolveServiceRefs', () => {
  const launch = {
    name: 'api',
    spec: { port: 1 },
    vars: { DB: '${services.db.url}', TOKEN: '${services.db.url}', PLAIN: 'x' },
    secretKeys: ['TOKEN'],
  };
  test('plain values get the URL, secret values stay as written, every password is masked', () => {
    const out = resolveServiceRefs(launch, { db: 'postgres://preview:pw1234@127.0.0.1:5/preview' }, [
      'pw1234',
    ]);
    expect(out.vars).toEqual({
      DB: 'postgres://preview:pw1234@127.0.0.1:5/preview',
      TOKEN: '${services.db.url}',
      PLAIN: 'x',
    });
    expect(out.masked).toEqual(['pw1234']);
  });
  test('an undeclared service or another field fails, naming it and never a URL', () => {
    expect(() => resolveServiceRefs(launch, {}, [])).toThrow(
      'app api: env DB references service db, which preview.yaml does not declare',
    );
    expect(() =>
      resolveServiceRefs({ ...launch, vars: { DB: '${services.db.host}' } }, { db: 'u' }, []),
    ).toThrow('app api: env DB: ${services.db.host} is not a reference; use ${services.<name>.url}');
  });
});
