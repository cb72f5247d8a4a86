import { describe, expect, test } from '@jest/globals';
import type { RunItem } from './store.js';
import { toTestRunView } from './views.js';

const run = (over: Partial<RunItem> = {}): RunItem => ({
  runId: 'run1',
  orgId: 'org1',
  testId: 'test1',
  name: 'Checkout works',
  status: 'pending',
  createdAt: '2026-01-02T03:04:05.000Z',
  folder: { id: 'f1', name: 'Folder one' },
  source: 'api',
  variables: { EMAIL: 'secret@example.com' },
  steps: [
    {
      id: 'step1',
      instruction: 'Type {{variable:EMAIL}}',
      interaction: 'input-text',
      url: 'https://shop.example/login',
      element: { html: '<input>', selector: '#email' },
      output: '',
      status: 'pending',
      imageKey: 'runs/run1/step1.png',
    },
  ],
  videoKey: 'runs/run1/video.mp4',
  createdKey: '2026-01-02T03:04:05.000Z#run1',
  testKey: 'org1#test1',
  folderKey: 'org1#f1',
  statusKey: 'org1#pending',
  ...over,
});

describe('toTestRunView', () => {
  const sign = (key: string) => `https://media.example/${key}?expires=3600`;

  test('refused origins: `refused_requests` with the hint on a run that has any, nothing otherwise', () => {
    expect(toTestRunView(run(), { media: false, steps: false }).refused_requests).toBeUndefined();
    expect(toTestRunView(run({ refusedOrigins: [] }), { media: false, steps: false })).not.toHaveProperty(
      'refused_requests',
    );
    const view = toTestRunView(run({ refusedOrigins: ['https://fonts.example.com'] }), {
      media: false,
      steps: false,
    });
    expect(view.refused_requests).toEqual({
      origins: ['https://fonts.example.com'],
      hint: expect.stringContaining("an application's allowedOrigins admits an origin"),
    });
  });

  test('no media URLs unless media=true, even when the run has media', () => {
    const view = toTestRunView(run(), { media: false, steps: true }, sign);
    expect(view.video_url).toBeNull();
    expect(view.steps?.[0]?.image).toBeNull();
  });
  test('media=true signs the stored keys (the seam for a media port)', () => {
    const view = toTestRunView(run(), { media: true, steps: true }, sign);
    expect(view.video_url).toBe('https://media.example/runs/run1/video.mp4?expires=3600');
    expect(view.steps?.[0]?.image).toBe('https://media.example/runs/run1/step1.png?expires=3600');
  });
  test('media=true without stored media, or without a signer, is null', () => {
    expect(
      toTestRunView(run({ videoKey: undefined }), { media: true, steps: false }, sign).video_url,
    ).toBeNull();
    expect(toTestRunView(run(), { media: true, steps: false }).video_url).toBeNull();
  });
  test('the TestRun shape: variables never leak; steps only when asked', () => {
    const view = toTestRunView(run({ endedAt: '2026-01-02T03:05:00.000Z', applicationVersionId: 'av1' }), {
      media: false,
      steps: false,
    });
    expect(view).toEqual({
      id: 'run1',
      name: 'Checkout works',
      test_id: 'test1',
      status: 'pending',
      created_at: '2026-01-02T03:04:05.000Z',
      ended_at: '2026-01-02T03:05:00.000Z',
      folder_run_id: null,
      job_run_id: null,
      job_id: null,
      folder: { id: 'f1', name: 'Folder one' },
      video_url: null,
      metadata: { source: 'api', application_version_id: 'av1' },
    });
    expect(JSON.stringify(toTestRunView(run(), { media: true, steps: true }))).not.toContain('secret@');
  });
});
