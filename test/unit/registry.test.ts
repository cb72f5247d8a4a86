import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { tableNames, tables } from '../../functions/manifest/tables.js';
import { runtime, sourceHost } from '../../functions/ports/registry.js';
import { publicMessage, ServiceUnavailableError, statusOf } from '../../functions/shared/errors.js';

// AWS mode with the adapters that are not built yet: a caller gets a clear 503, never a 500.
const vars: Record<string, string> = {
  PREVIEW_MODE: 'aws',
  AWS_REGION: 'eu-west-1',
  ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
};
const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
beforeAll(() => {
  Object.assign(process.env, vars);
});
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

describe('the registry in aws mode, for an adapter that is not built', () => {
  test.each([
    ['sourceHost', sourceHost, /GitHub source-host adapter is not built yet/],
    ['runtime', runtime, /EKS runtime adapter is not built yet/],
  ] as const)('%s() is a 503 that says so', (_name, getter, message) => {
    let thrown: unknown;
    try {
      getter();
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ServiceUnavailableError);
    expect(statusOf(thrown)).toBe(503);
    expect(publicMessage(thrown)).toMatch(message);
  });
});
