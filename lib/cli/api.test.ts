import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from '@jest/globals';
import { localCredentials } from './api.js';

describe('local credentials', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cli-creds-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('the only organization by default; --org picks one of several; an unknown one is named', () => {
    writeFileSync(join(dir, 'credentials.json'), JSON.stringify({ orgId: 'o1', apiKey: 'k1' }));
    expect(localCredentials(dir, undefined)).toEqual({ orgId: 'o1', apiKey: 'k1' });
    const orgs = join(dir, 'orgs');
    mkdirSync(orgs);
    writeFileSync(join(orgs, 'o2.json'), JSON.stringify({ orgId: 'o2', apiKey: 'k2' }));
    expect(() => localCredentials(dir, undefined)).toThrow(
      `${dir} holds 2 organizations (o1, o2): pass --org ORG or set PREVIEW_ORG`,
    );
    expect(localCredentials(dir, 'o2').apiKey).toBe('k2');
    expect(() => localCredentials(dir, 'o3')).toThrow(`organization o3 not found in ${dir} (known: o1, o2)`);
  });
});
