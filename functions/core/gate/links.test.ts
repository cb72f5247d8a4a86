import { afterEach, describe, expect, test } from '@jest/globals';
import { tableNames, tables } from '../../manifest/tables.js';
import type { LinkSigner } from '../../ports/media/port.js';
import { defaultPublicUrl } from '../../shared/config.js';
import { commitPagePath, commitViewUrl, gateLinks } from './links.js';

const REF = { orgId: 'org-1', envKey: 'acme/web#7', repoFullName: 'acme/web', prNumber: 7 };

const saved = { ...process.env };
const base = {
  PREVIEW_MODE: 'aws',
  AWS_REGION: 'eu-west-1',
  ...Object.fromEntries(tableNames.map((t) => [tables[t].envVar, `t-${t}`])),
};
afterEach(() => {
  process.env = { ...saved };
});

const signed: string[] = [];
const media: LinkSigner = {
  signLink: async (path, ttl) => {
    signed.push(`${path} ${ttl}`);
    return 'expires=2&sig=r';
  },
};

describe('gateLinks', () => {
  test('no public URL: no links, and the media reader is never built', () => {
    process.env = { ...base };
    defaultPublicUrl('');
    let built = false;
    expect(
      gateLinks(() => {
        built = true;
        return media;
      }),
    ).toBeUndefined();
    expect(built).toBe(false);
  });

  test('the per-commit view, the signed report link (7 days) and the report at the failed step, from the public URL', async () => {
    process.env = { ...base, PREVIEW_MODE: 'local', PREVIEW_DATA_DIR: '/tmp/gate-links' };
    defaultPublicUrl('https://p.example.com/v1');
    const links = gateLinks(() => media)!;
    expect(await links.details({ ...REF, sha: 'ab'.repeat(20) })).toBe(
      `https://p.example.com/v1/?env=acme%2Fweb%237&commit=${'ab'.repeat(20)}`,
    );
    expect(await links.report('run-1')).toBe('https://p.example.com/v1/report/run-1?expires=2&sig=r');
    expect(signed).toEqual([`/report/run-1 ${7 * 24 * 3600}`]);
    // The screenshot is the report's, at its step: no second signature, no media URL.
    expect(links.screenshot('https://p.example.com/v1/report/run-1?expires=2&sig=r', 3)).toBe(
      'https://p.example.com/v1/report/run-1?expires=2&sig=r#step-3',
    );
    expect(signed).toHaveLength(1);
  });

  test('AWS: details_url is the signed page of the head (7 days), as reports; screenshots', async () => {
    process.env = { ...base, PUBLIC_URL: 'https://api.example.com/prod' };
    defaultPublicUrl('');
    signed.length = 0;
    const links = gateLinks(() => media)!;
    const sha = 'AB'.repeat(20);
    expect(await links.details({ ...REF, sha })).toBe(
      `https://api.example.com/prod/gate/org-1/acme/web/7/${sha.toLowerCase()}?expires=2&sig=r`,
    );
    expect(await links.report('run-9')).toBe('https://api.example.com/prod/report/run-9?expires=2&sig=r');
    expect(signed).toEqual([
      `/gate/org-1/acme/web/7/${sha.toLowerCase()} ${7 * 24 * 3600}`,
      `/report/run-9 ${7 * 24 * 3600}`,
    ]);
    expect(
      commitPagePath({ orgId: 'o', repoFullName: 'Acme/my.repo', prNumber: 12, sha: 'f'.repeat(40) }),
    ).toBe(`/gate/o/Acme/my.repo/12/${'f'.repeat(40)}`);
  });

  test('an operator PUBLIC_URL wins over the local server URL', async () => {
    process.env = {
      ...base,
      PREVIEW_MODE: 'local',
      PREVIEW_DATA_DIR: '/tmp/gate-links',
      PUBLIC_URL: 'https://tunnel.example.com',
    };
    defaultPublicUrl('http://127.0.0.1:3000');
    expect(await gateLinks(() => media)!.details({ ...REF, envKey: 'e', sha: 's' })).toBe(
      'https://tunnel.example.com/?env=e&commit=s',
    );
    expect(commitViewUrl('http://x', { envKey: 'a&b', sha: '<s>' })).toBe(
      'http://x/?env=a%26b&commit=%3Cs%3E',
    );
  });
});
