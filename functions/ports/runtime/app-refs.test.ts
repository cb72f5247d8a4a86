// biome-ignore-all lint/suspicious/noTemplateCurlyInString: preview.yaml's `${apps.<name>.url}` syntax, not JS templates
import { describe, expect, test } from '@jest/globals';
import { referencedApps, resolveAppRefs } from './app-refs.js';

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
