import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from '@jest/globals';
import type { LocalMediaStore } from '../../../functions/ports/media/local-files.js';
import { mediaReader } from '../../../functions/ports/registry.js';
import { ddb, table } from '../../../functions/shared/aws/dynamo.js';
import { call, client } from '../../support/api.js';
import { launchChromium } from '../../support/chromium.js';
import { localServerForFile } from '../../support/local-server.js';
import { decodePng } from '../../support/png.js';
import { runEnded, signUpSteps, step } from '../../support/runs-app.js';
import { runsAppForFile } from '../../support/runs-suite.js';
import { probeVideo } from '../../support/video.js';

/*
 * Test runs, end to end: the fixture app (a form page and a result page) deployed through the local
 * pipeline as an application's main-branch environment; tests run in Debian's chromium through
 * playwright-core, with a screenshot per step, a video, media at signed expiring URLs and a report page.
 */

let media: LocalMediaStore;
const API_TOKEN = 'tok-3f9a1c7e5b2d';
const h = localServerForFile();
const app = runsAppForFile(h, { secrets: { API_TOKEN } });
beforeAll(() => {
  media = mediaReader() as LocalMediaStore;
});

const startRun = (testId: string, body?: unknown) =>
  call(h, 'POST', `/test/${testId}/run`, { headers: client(h.org), body });

async function fetchBytes(url: string): Promise<{ status: number; type: string | null; body: Buffer }> {
  const res = await fetch(url);
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    body: Buffer.from(await res.arrayBuffer()),
  };
}

describe('a passing run', () => {
  let testId: string;
  let started: { url: string; run_id: string };
  let run: any;
  let startedAt: number;
  let endedAt: number;

  beforeAll(async () => {
    testId = await app.importTest({});
    startedAt = Date.now();
    const res = await startRun(testId, { runtime_metadata: { EMAIL: 'run@example.com' } });
    expect(res.status).toBe(201);
    started = res.body;
    run = await runEnded(h, started.run_id);
    endedAt = Date.now();
  }, 120_000);

  test('ends passed, every step passed with its output and the page after it', () => {
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('passed');
    expect(run.ended_at).toEqual(expect.any(String));
    expect(run.steps.map((s: any) => [s.interaction, s.status])).toEqual([
      ['navigate', 'passed'],
      ['input-text', 'passed'],
      ['click', 'passed'],
      ['assert-text', 'passed'],
    ]);
    const appUrl = app.main.urls.web!;
    expect(run.steps.map((s: any) => s.url)).toEqual([
      `${appUrl}/`,
      `${appUrl}/`,
      `${appUrl}/result`,
      `${appUrl}/result`,
    ]);
    expect(run.steps[0].output).toBe(`opened ${appUrl}/`);
    expect(run.steps[1].output).toBe('typed 15 characters into #email');
    expect(run.steps[2].output).toBe('clicked #submit');
    // The override (not the saved value) was typed and found; an e-mail address is no secret:
    // only variables whose names say so are masked.
    expect(run.steps[3].output).toBe('found "Welcome, run@example.com" in #greeting');
  });

  test('each step has a decodable PNG screenshot of the viewport', async () => {
    for (const s of run.steps) {
      const img = await fetchBytes(s.image);
      expect([s.interaction, img.status, img.type]).toEqual([s.interaction, 200, 'image/png']);
      expect(decodePng(img.body)).toMatchObject({ width: 1280, height: 720 });
    }
  });

  test('the video is an MP4 whose duration is above zero and close to the run', async () => {
    expect(run.video_url).toEqual(expect.stringContaining('/media/'));
    const video = await fetchBytes(run.video_url);
    expect(video.status).toBe(200);
    expect(video.type).toBe('video/mp4');
    const file = join(h.dataDir, 'video-under-test.mp4');
    writeFileSync(file, video.body);
    const probed = probeVideo(file);
    const duration = probed.durationSeconds;
    expect(duration).toBeGreaterThan(0);
    // No longer than the run took from POST to its end (it starts with the browser, after the POST).
    expect(duration).toBeLessThanOrEqual((endedAt - startedAt) / 1000 + 1);
    expect(probed).toMatchObject({ codec: 'h264', width: 1280, height: 720 });
  });

  test('media URLs: 200 as signed, 403 when tampered with, 410 once expired (the clock moved)', async () => {
    // Minted on this read: valid one hour from now.
    const fresh = await call(h, 'GET', `/run/${started.run_id}?steps=true&media=true`, {
      headers: client(h.org),
    });
    const url = new URL(fresh.body.steps[0].image);
    expect(url.searchParams.get('expires')).toMatch(/^\d+$/);
    const expires = Number(url.searchParams.get('expires'));
    expect(expires * 1000 - Date.now()).toBeGreaterThan(3590_000);
    expect(expires * 1000 - Date.now()).toBeLessThanOrEqual(3600_000);
    expect((await fetchBytes(url.href)).status).toBe(200);

    const badSig = new URL(url);
    const sig = badSig.searchParams.get('sig')!;
    badSig.searchParams.set('sig', `${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`);
    const laterExpiry = new URL(url);
    laterExpiry.searchParams.set('expires', String(expires + 3600));
    const otherKey = new URL(run.steps[1].image);
    otherKey.search = url.search; // step 1's signature on step 2's image
    const unsigned = new URL(url);
    unsigned.search = '';
    for (const tampered of [badSig, laterExpiry, otherKey, unsigned]) {
      const res = await fetchBytes(tampered.href);
      expect([tampered.search.slice(0, 40), res.status]).toEqual([tampered.search.slice(0, 40), 403]);
    }

    const realNow = media.now;
    try {
      media.now = () => (expires + 1) * 1000;
      expect((await fetchBytes(url.href)).status).toBe(410);
      expect((await fetchBytes(run.video_url)).status).toBe(410);
      // A tampered link is 403 even once expired: the signature is checked first.
      expect((await fetchBytes(badSig.href)).status).toBe(403);
    } finally {
      media.now = realNow;
    }
    // URLs are minted when read: read the run again after the clock moved and they work again.
    media.now = () => (expires + 10) * 1000;
    try {
      const again = await call(h, 'GET', `/run/${started.run_id}?steps=true&media=true`, {
        headers: client(h.org),
      });
      expect((await fetchBytes(again.body.steps[0].image)).status).toBe(200);
    } finally {
      media.now = realNow;
    }
  });

  test('media answers HEAD and byte ranges (video players ask for them); 404 for a signed missing key', async () => {
    const fresh = await call(h, 'GET', `/run/${started.run_id}?media=true`, { headers: client(h.org) });
    const head = await fetch(fresh.body.video_url, { method: 'HEAD' });
    expect([head.status, head.headers.get('content-type'), head.headers.get('accept-ranges')]).toEqual([
      200,
      'video/mp4',
      'bytes',
    ]);
    const size = Number(head.headers.get('content-length'));
    const part = await fetch(fresh.body.video_url, { headers: { range: 'bytes=0-99' } });
    expect([part.status, part.headers.get('content-range'), (await part.arrayBuffer()).byteLength]).toEqual([
      206,
      `bytes 0-99/${size}`,
      100,
    ]);
    const post = await fetch(fresh.body.video_url, { method: 'POST' });
    expect([post.status, await post.json()]).toEqual([405, { error: 'method not allowed' }]);
    const missing = await fetch(await media.url(`runs/${h.org.orgId}/nope/video.mp4`, h.url));
    expect([missing.status, await missing.json()]).toEqual([404, { error: 'not found' }]);
  });

  test('without media=true, video_url and images are null; only keys are stored', async () => {
    const res = await call(h, 'GET', `/run/${started.run_id}?steps=true`, { headers: client(h.org) });
    expect(res.body.video_url).toBeNull();
    expect(res.body.steps.map((s: any) => s.image)).toEqual([null, null, null, null]);
    const stored = (
      await ddb().send(new GetCommand({ TableName: table('runs'), Key: { runId: started.run_id } }))
    ).Item!;
    expect(stored.videoKey).toBe(`runs/${h.org.orgId}/${started.run_id}/video.mp4`);
    expect(stored.steps.map((s: any) => s.imageKey)).toEqual(
      stored.steps.map(
        (s: any, i: number) => `runs/${h.org.orgId}/${started.run_id}/step-00${i + 1}-${s.id}.png`,
      ),
    );
    expect(JSON.stringify(stored)).not.toMatch(/expires=|X-Amz-Signature/);
  });

  test('the start-run url is the run report; a browser opens it without credentials', async () => {
    expect(started.url).toMatch(new RegExp(`^${h.url}/report/${started.run_id}\\?expires=\\d+&sig=`));
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      const res = await page.goto(started.url, { waitUntil: 'load' });
      expect(res?.status()).toBe(200);
      // A Content-Security-Policy like the dashboard's: no script, media from its own origin;
      // the screenshots and the video below load under it.
      const csp = res!.headers()['content-security-policy'];
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain(`img-src ${new URL(h.url).origin}`);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('script-src');
      expect(await page.title()).toBe('Sign up works: passed');
      const body = await page.locator('body').innerText();
      expect(body).toContain('4/4 steps passed');
      expect(body).toContain('found "Welcome, run@example.com" in #greeting');
      // Every screenshot loaded (naturalWidth > 0) from its signed URL.
      const widths = await page.$$eval('img', (imgs) =>
        imgs.map((i) => (i as unknown as { naturalWidth: number }).naturalWidth),
      );
      expect(widths).toEqual([1280, 1280, 1280, 1280]);
      expect(await page.locator('video').count()).toBe(1);
      // The video plays from its signed URL: its metadata loads and names a duration.
      await page.waitForFunction('document.querySelector("video").readyState >= 1');
      expect(
        await page.$eval('video', (v) => (v as unknown as { duration: number }).duration),
      ).toBeGreaterThan(0);
      const shot = join(process.env.RUN_REPORT_SHOTS ?? tmpdir(), 'run-report-passed.png');
      writeFileSync(shot, await page.screenshot({ fullPage: true }));
      expect(decodePng(await page.screenshot()).width).toBe(1280);
    } finally {
      await browser.close();
    }
    const tampered = started.url.replace(/sig=./, (m) => (m.endsWith('A') ? 'sig=B' : 'sig=A'));
    const refused = await fetch(tampered);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('content-security-policy')).toContain("default-src 'none'");
    const realNow = media.now;
    try {
      media.now = () => Date.now() + 8 * 24 * 3600_000;
      expect((await fetch(started.url)).status).toBe(410);
    } finally {
      media.now = realNow;
    }
  }, 60_000);
});

describe('a failing run', () => {
  let run: any;
  let started: { url: string; run_id: string };
  beforeAll(async () => {
    const testId = await app.importTest({
      name: 'Sign up says goodbye',
      step_timeout_seconds: 2,
      steps: [
        ...signUpSteps.slice(0, 3),
        step('assert-text', 'The page says "Goodbye"'),
        step('click', 'Go back', { selector: '#home' }),
        step('assert-visible', 'The form is back', { selector: '#email' }),
      ],
    });
    started = (await startRun(testId)).body;
    run = await runEnded(h, started.run_id);
  }, 120_000);

  test('ends failed: that step failed saying what it looked for, the later ones skipped', async () => {
    expect(run.status).toBe('failed');
    expect(run.steps.map((s: any) => s.status)).toEqual([
      'passed',
      'passed',
      'passed',
      'failed',
      'skipped',
      'skipped',
    ]);
    expect(run.steps[3].output).toBe('text "Goodbye" not found in the page within 2 s');
    expect(run.error).toBe('step 4 (assert-text) failed: text "Goodbye" not found in the page within 2 s');
    // The failed step has its screenshot; skipped ones have none.
    expect(decodePng((await fetchBytes(run.steps[3].image)).body).width).toBe(1280);
    expect(run.steps.slice(4).map((s: any) => [s.image, s.output])).toEqual([
      [null, ''],
      [null, ''],
    ]);
    expect(run.video_url).toEqual(expect.any(String));
  });

  test('the report shows the failure', async () => {
    const res = await fetch(started.url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await res.text();
    expect(html).toContain('<title>Sign up says goodbye: failed</title>');
    expect(html).toContain(
      'step 4 (assert-text) failed: text &quot;Goodbye&quot; not found in the page within 2 s',
    );
    expect(html).toContain('3/6 steps passed');
  });

  test('the list filter by status finds the passed and the failed runs', async () => {
    const passed = await call(h, 'GET', '/run?status=passed', { headers: client(h.org) });
    const failed = await call(h, 'GET', '/run?status=failed', { headers: client(h.org) });
    expect(passed.body.map((r: any) => r.status)).toContain('passed');
    expect(passed.body.every((r: any) => r.status === 'passed')).toBe(true);
    expect(failed.body.map((r: any) => r.id)).toContain(started.run_id);
    expect(failed.body.every((r: any) => r.status === 'failed')).toBe(true);
    const running = await call(h, 'GET', '/run?status=running', { headers: client(h.org) });
    const pending = await call(h, 'GET', '/run?status=pending', { headers: client(h.org) });
    expect([running.body, pending.body]).toEqual([[], []]);
  });
});

describe('the other interactions', () => {
  test('wait-for, assert-visible, press, quoted input-text; a secret in the page URL is masked', async () => {
    const testId = await app.importTest({
      name: 'Everything else',
      steps: [
        step('navigate', 'Open the late page', { url: '/late' }),
        step('wait-for', 'Wait for the button', { selector: '#late' }),
        step('assert-visible', 'The button is visible', { selector: 'text=Here' }),
        step('navigate', 'Back to the form', { url: '' }),
        step('input-text', 'Type "typed {{variable:EMAIL}}" into the email field', { selector: '#email' }),
        step('press', 'Press Enter', { selector: '#email' }),
        step('assert-text', 'The greeting is "Welcome, typed saved@example.com"', { selector: '#greeting' }),
        step('navigate', 'Follow the leaky link', { url: 'leak' }),
        step('assert-text', 'It says "Landed"'),
      ],
    });
    const run = await runEnded(h, (await startRun(testId)).body.run_id);
    expect(run.error).toBeUndefined();
    expect(run.steps.map((s: any) => [s.interaction, s.status, s.output])).toEqual([
      ['navigate', 'passed', `opened ${app.main.urls.web}/late`],
      ['wait-for', 'passed', '#late appeared'],
      ['assert-visible', 'passed', 'text=Here is visible'],
      ['navigate', 'passed', `opened ${app.main.urls.web}/`],
      ['input-text', 'passed', 'typed 23 characters into #email'],
      ['press', 'passed', 'pressed Enter on #email'],
      ['assert-text', 'passed', 'found "Welcome, typed saved@example.com" in #greeting'],
      ['navigate', 'passed', `opened ${app.main.urls.web}/leak`],
      ['assert-text', 'passed', 'found "Landed" in the page'],
    ]);
    expect(run.status).toBe('passed');
    // The app put its secret (from its secret bundle) in the URL it redirected to: masked.
    expect(run.steps[7].url).toBe(`${app.main.urls.web}/landing?token=[secret]`);
    expect(JSON.stringify(run)).not.toContain(API_TOKEN);
  }, 90_000);

  test('a variable the tests file marks secret is masked though its name says nothing', async () => {
    const testId = await app.importTest({
      name: 'Marked secret',
      variables: { EMAIL: 'marked@example.com' },
      secret_variables: ['EMAIL'],
    });
    const run = await runEnded(h, (await startRun(testId)).body.run_id);
    expect(run.status).toBe('passed');
    expect(run.steps[3].output).toBe('found "Welcome, [secret]" in #greeting');
    expect(JSON.stringify(run)).not.toContain('marked@example.com');
  }, 90_000);

  test('an unknown interaction fails its step saying so; an unknown variable names itself', async () => {
    const unknown = await app.importTest({
      name: 'Hover',
      steps: [
        step('navigate', 'Open', { url: '/' }),
        step('hover', 'Hover the button', { selector: '#submit' }),
      ],
    });
    const variable = await app.importTest({
      name: 'Missing variable',
      steps: [
        step('input-text', 'Type {{variable:PHONE}}', { selector: '#email' }),
        step('click', 'Go', { selector: '#submit' }),
      ],
    });
    const noSelector = await app.importTest({ name: 'Click nothing', steps: [step('click', 'Click')] });
    const [a, b, c] = await Promise.all(
      [unknown, variable, noSelector].map(async (id) => runEnded(h, (await startRun(id)).body.run_id)),
    );
    expect(a.steps.map((s: any) => [s.status, s.output])).toEqual([
      ['passed', `opened ${app.main.urls.web}/`],
      [
        'failed',
        'unknown interaction "hover": a step is one of navigate, click, input-text, assert-text, assert-visible, wait-for, press',
      ],
    ]);
    expect(a.status).toBe('failed');
    expect(b.steps.map((s: any) => [s.status, s.output])).toEqual([
      ['failed', 'unknown variable "PHONE" (the test saves EMAIL)'],
      ['skipped', ''],
    ]);
    expect(c.steps.map((s: any) => [s.status, s.output])).toEqual([
      ['failed', 'click needs element.selector'],
    ]);
    expect(c.error).toBe('step 1 (click) failed: click needs element.selector');
  }, 90_000);
});
