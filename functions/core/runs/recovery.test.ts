import { describe, expect, test } from '@jest/globals';
import { executorReserveMs } from './execution/deadline.js';
import { abandonedAt, EXECUTE_STATE_MS, PENDING_STALE_MS, SWEEP_MARGIN_MS } from './recovery.js';

describe('when the sweep counts a run abandoned', () => {
  const t0 = Date.parse('2026-01-01T00:00:00.000Z');
  test('a running run: past the Execute state limit or its own limit plus the reserve, plus the margin', () => {
    const run = {
      status: 'running' as const,
      createdAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:00.000Z',
    };
    expect(abandonedAt({ ...run, runTimeoutSeconds: 60 }, 600)).toBe(t0 + EXECUTE_STATE_MS + SWEEP_MARGIN_MS);
    expect(abandonedAt({ ...run, runTimeoutSeconds: 840 }, 600)).toBe(
      t0 + 840_000 + executorReserveMs({ scenario: true }) + SWEEP_MARGIN_MS,
    );
  });
  test('a pending run: 20 minutes after it was created', () => {
    expect(abandonedAt({ status: 'pending', createdAt: '2026-01-01T00:00:00.000Z' }, 600)).toBe(
      t0 + PENDING_STALE_MS,
    );
  });
});
