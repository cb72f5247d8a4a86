import { describe, expect, test } from '@jest/globals';
import { runFailureMessage } from '../lifecycle.js';
import { renderRunReport } from '../report.js';
import type { RunItem } from '../store.js';
import { joinAppUrl } from '../target.js';
import { toTestRunView } from '../views.js';
import {
  browserError,
  inputValue,
  keyOf,
  navigateUrl,
  normalizeInteraction,
  quotedText,
  StepFailure,
  substituteVariables,
} from './steps.js';

/* The step semantics that need no browser: variables, quoted text, keys, URLs, messages. */

const vars = Object.assign(Object.create(null), { EMAIL: 'a@b.c', constructor: 'ctor' }) as Record<
  string,
  string
>;

describe('variables and quoted text', () => {
  test('{{variable:NAME}} is replaced by its value; an unknown name fails naming it', () => {
    expect(substituteVariables('to {{variable:EMAIL}} and {{ variable:constructor }}', vars)).toBe(
      'to a@b.c and ctor',
    );
    expect(() => substituteVariables('{{variable:PHONE}}', vars)).toThrow(
      new StepFailure('unknown variable "PHONE" (the test saves EMAIL, constructor)'),
    );
    expect(() => substituteVariables('{{variable:toString}}', vars)).toThrow(StepFailure);
  });

  test('quoted text: "…" or “…”, variables substituted; none is undefined', () => {
    expect(quotedText('Check "Hello {{variable:EMAIL}}" is there', vars)).toBe('Hello a@b.c');
    expect(quotedText('Check “Hi” is there', vars)).toBe('Hi');
    expect(quotedText('No quotes', vars)).toBeUndefined();
  });

  test('input-text types the quoted text, else the first variable, else fails', () => {
    expect(inputValue('Type {{variable:EMAIL}} in the field', vars)).toBe('a@b.c');
    expect(inputValue('Type "x {{variable:EMAIL}}" in the field', vars)).toBe('x a@b.c');
    expect(() => inputValue('Type something', vars)).toThrow(
      'input-text needs a value in its instruction: {{variable:NAME}} or "quoted text"',
    );
    expect(() => inputValue('Type {{variable:NOPE}}', vars)).toThrow('unknown variable "NOPE"');
  });

  test('press: the quoted key, else the last word', () => {
    expect(keyOf('Press Enter', vars)).toBe('Enter');
    expect(keyOf('Press "Control+A" to select', vars)).toBe('Control+A');
  });

  test('interaction names are case- and separator-insensitive', () => {
    expect(['Input_Text', 'input text', 'ASSERT-TEXT', ' click '].map(normalizeInteraction)).toEqual([
      'input-text',
      'input-text',
      'assert-text',
      'click',
    ]);
  });
});

describe('URLs', () => {
  const target = { url: 'http://h:1/app/start', appUrl: 'http://h:1/app' };
  test('navigate resolves against the app URL; empty is the first page; absolute stays', () => {
    expect(navigateUrl('', target)).toBe('http://h:1/app/start');
    expect(navigateUrl('/result', target)).toBe('http://h:1/result');
    expect(navigateUrl('result?q=1', target)).toBe('http://h:1/app/result?q=1');
    expect(navigateUrl('https://other.example/x', target)).toBe('https://other.example/x');
  });

  test('the first page is the app URL plus the version path', () => {
    expect(joinAppUrl('http://h:1', '/builds/v1')).toBe('http://h:1/builds/v1');
    expect(joinAppUrl('http://h:1/', 'form')).toBe('http://h:1/form');
    expect(joinAppUrl('http://h:1', '')).toBe('http://h:1');
  });
});

describe('messages', () => {
  test('browser errors: the first lines, no ANSI colours, no stack', () => {
    const err = new Error(
      "locator.click: Timeout 15000ms exceeded.\nCall log:\n\u001b[2m  - waiting for locator('#x').first()\u001b[22m\n",
    );
    err.stack = 'at x\nat y';
    expect(browserError(err)).toBe(
      "locator.click: Timeout 15000ms exceeded. | waiting for locator('#x').first()",
    );
    expect(browserError(new StepFailure('plain'))).toBe('plain');
  });

  test('a caught state-machine failure becomes the run error', () => {
    expect(runFailureMessage({ Error: 'States.Timeout' })).toBe(
      'the run executor timed out (the state machine gives it 15 minutes)',
    );
    expect(runFailureMessage({ Error: 'Error', Cause: '{"errorType":"Error","errorMessage":"boom"}' })).toBe(
      'the run failed: boom',
    );
    expect(runFailureMessage({ Error: 'Error', Cause: 'plain' })).toBe('the run failed: plain');
  });
});

const run: RunItem = {
  runId: 'r1',
  orgId: 'o',
  testId: 't',
  name: 'A <script>',
  status: 'failed',
  error: 'step 1 (click) failed: <b>',
  createdAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:02.000Z',
  folder: { id: 'f', name: 'F' },
  source: 'api',
  variables: {},
  steps: [
    {
      id: 's',
      instruction: 'Click "<x>"',
      interaction: 'click',
      url: 'http://h/',
      element: { html: '', selector: '#a' },
      output: 'failed <i>',
      status: 'failed',
      imageKey: 'runs/o/r1/step-001-s.png',
    },
  ],
  videoKey: 'runs/o/r1/video.mp4',
  createdKey: 'k',
  testKey: 'k',
  folderKey: 'k',
  statusKey: 'k',
};

test('the view shows a failed run its error; only media=true shows URLs', () => {
  expect(toTestRunView(run, { media: false, steps: false }).error).toBe('step 1 (click) failed: <b>');
  expect(toTestRunView({ ...run, status: 'passed' }, { media: false, steps: false }).error).toBeUndefined();
  const signed = toTestRunView(run, { media: true, steps: true }, (k) => `https://m/${k}`);
  expect(signed.video_url).toBe('https://m/runs/o/r1/video.mp4');
  expect(signed.steps?.[0]?.image).toBe('https://m/runs/o/r1/step-001-s.png');
});

test('the report escapes what the test and the page wrote', () => {
  const html = renderRunReport(run, new Map([['runs/o/r1/video.mp4', 'https://m/v?a=1&b=2']]));
  expect(html).not.toContain('<script>');
  expect(html).toContain('A &lt;script&gt;');
  expect(html).toContain('failed &lt;i&gt;');
  expect(html).toContain('src="https://m/v?a=1&amp;b=2"');
  expect(html).not.toContain('http-equiv="refresh"');
  expect(renderRunReport({ ...run, status: 'running' }, new Map())).toContain('http-equiv="refresh"');
});

test('each step of the report is an anchor (`#step-N`), where the merge gate links a failed step', () => {
  const html = renderRunReport(run, new Map([['runs/o/r1/step-001-s.png', 'https://m/s.png']]));
  const row = /<tr id="step-1">([\s\S]*?)<\/tr>/.exec(html);
  expect(row?.[1]).toContain('failed &lt;i&gt;');
  expect(row?.[1]).toContain('src="https://m/s.png"');
  expect(html).not.toContain('id="step-2"');
  expect(html).toContain('tr:target{');
});
