import { describe, expect, test } from '@jest/globals';
import { sampleEnvironment } from '../../../test/support/environments.js';
import { buildReport, renderComment } from './pr-status.js';
import type { Environment } from './types.js';

/* Issue 29: a protected preview's PR comment carries each app's signed access link (never the key). */

const env = (over: Partial<Environment> = {}): Environment =>
  sampleEnvironment({
    urls: { web: 'https://web.pr-7.example.com', api: 'https://api.pr-7.example.com' },
    ...over,
  });
const links = {
  web: 'https://web.pr-7.example.com/__preview/access?token=v1.1900000000.w',
  api: 'https://api.pr-7.example.com/__preview/access?token=v1.1900000000.a',
};

describe("a protected preview's comment", () => {
  test('each app its link, a note saying how to get fresh ones', () => {
    const text = renderComment(env(), 'success', [], links);
    expect(text).toContain('| App | URL | Access link |');
    expect(text).toContain(`| api | https://api.pr-7.example.com | [open api](${links.api}) |`);
    expect(text).toContain(`| web | https://web.pr-7.example.com | [open web](${links.web}) |`);
    expect(text).toContain('This preview is protected');
    expect(text).toContain('`previewctl envs open --repo acme/shop --pr 7`');
  });

  test('an app without a link says so; the report carries the same comment', () => {
    const text = renderComment(env(), 'success', [], { web: links.web });
    expect(text).toContain('| api | https://api.pr-7.example.com | — |');
    const built = buildReport(env(), [], links);
    expect('report' in built && built.report.comment).toBe(renderComment(env(), 'success', [], links));
    // The deployment's link stays the app's URL: the signed link is only in the comment.
    expect('report' in built && built.report.environmentUrl).toBe('https://web.pr-7.example.com');
  });

  test('no links while deploying, failed or torn down, nor for a public preview', () => {
    for (const [e, state] of [
      [env({ status: 'building' }), 'in_progress'],
      [env({ status: 'failed', error: 'x' }), 'failure'],
      [env({ status: 'torn_down', urls: {} }), 'inactive'],
    ] as const) {
      const text = renderComment(e, state, [], links);
      expect(text).not.toContain('__preview/access');
      expect(text).not.toContain('Access link');
    }
    const open = renderComment(env(), 'success');
    expect(open).toContain('| App | URL |');
    expect(open).not.toContain('protected');
  });
});
