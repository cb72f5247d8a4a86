import { expect, test } from '@jest/globals';
import { attemptsHtml, refusedHtml } from './report.js';

const attempt = (number: number, status: 'passed' | 'failed', error?: string) => ({
  number,
  status,
  ...(error ? { error } : {}),
  steps: [status],
  videoKey: `runs/r1/attempt-${number}/video.mp4`,
  traceKey: `runs/r1/attempt-${number}/trace.zip`,
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:01.000Z',
});
const urls = new Map([
  ['runs/r1/attempt-1/video.mp4', 'https://m/v1'],
  ['runs/r1/attempt-1/trace.zip', 'https://m/t1'],
  ['runs/r1/attempt-2/video.mp4', 'https://m/v2'],
  ['runs/r1/attempt-2/trace.zip', 'https://m/t2'],
]);

test('a flaky run says which attempt passed and links every attempt its video and trace', () => {
  const html = attemptsHtml(
    {
      status: 'passed',
      flaky: true,
      attempts: [attempt(1, 'failed', 'step 2 <b> failed'), attempt(2, 'passed')],
    },
    urls,
    (t) => `/trace-viewer/?trace=${encodeURIComponent(t)}`,
  );
  expect(html).toContain('passed on attempt 2 of 2 (flaky)');
  expect(html).toContain('href="https://m/v1"');
  expect(html).toContain('href="https://m/v2"');
  expect(html).toContain(`href="/trace-viewer/?trace=${encodeURIComponent('https://m/t1')}"`);
  expect(html).toContain(`href="/trace-viewer/?trace=${encodeURIComponent('https://m/t2')}"`);
  expect(html).toContain('step 2 &lt;b&gt; failed');
});

test('a run of one attempt shows no attempts; a run failed on every attempt is not flaky', () => {
  expect(attemptsHtml({ status: 'passed', attempts: [attempt(1, 'passed')] }, urls)).toBe('');
  const failed = attemptsHtml(
    { status: 'failed', attempts: [attempt(1, 'failed'), attempt(2, 'failed')] },
    urls,
  );
  expect(failed).toContain('failed on attempt 2 of 2<');
  expect(failed).not.toContain('flaky');
});

test('the origins refused to the page are listed, escaped, with how an application admits one', () => {
  expect(refusedHtml({})).toBe('');
  expect(refusedHtml({ refusedOrigins: [] })).toBe('');
  const html = refusedHtml({ refusedOrigins: ['https://fonts.example.com', 'https://a.example<b>'] });
  expect(html).toContain('<code>https://fonts.example.com</code> <code>https://a.example&lt;b&gt;</code>');
  expect(html).toContain('allowedOrigins admits an origin');
  expect(html).not.toContain('<b>');
});
