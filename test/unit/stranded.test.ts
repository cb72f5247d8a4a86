import { describe, expect, test } from '@jest/globals';
import { STRANDED_DEPLOY_MS, STRANDED_TEARDOWN_MS, strandedWork } from '../../functions/core/expiry.js';

const NOW = Date.parse('2026-11-22T12:00:00.000Z');
const at = (msAgo: number) => new Date(NOW - msAgo).toISOString();

describe('strandedWork: the work a record claims that nothing is doing', () => {
  test.each([
    [
      'a deploy request picked up by nothing for too long',
      'pending',
      false,
      STRANDED_DEPLOY_MS + 1,
      'deploy',
    ],
    [
      'a deploy request just made (its state machine may be starting)',
      'pending',
      false,
      STRANDED_DEPLOY_MS,
      undefined,
    ],
    [
      'a deploy under way, however long (its steps have their own timeouts)',
      'building',
      false,
      86_400_000,
      undefined,
    ],
    ['a settled environment', 'ready', false, 86_400_000, undefined],
    ['a teardown request with no outcome for too long', 'ready', true, STRANDED_TEARDOWN_MS + 1, 'teardown'],
    ['a teardown of an environment still deploying', 'pending', true, STRANDED_TEARDOWN_MS + 1, 'teardown'],
    ['a teardown request within what its task may take', 'ready', true, STRANDED_TEARDOWN_MS, undefined],
    [
      'a teardown that failed (its error shows; a new DELETE tries again)',
      'failed',
      true,
      86_400_000,
      undefined,
    ],
    ['a teardown that ended', 'torn_down', true, 86_400_000, undefined],
  ] as const)('%s', (_, status, tornDownRequested, ago, work) => {
    expect(strandedWork({ status, tornDownRequested, updatedAt: at(ago) }, NOW)).toBe(work);
  });

  test('a record without a readable date is left alone', () => {
    expect(strandedWork({ status: 'pending', updatedAt: 'not a date' }, NOW)).toBeUndefined();
  });
});
