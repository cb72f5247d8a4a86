import { describe, expect, test } from '@jest/globals';
import type { WorkflowName } from '../../manifest/workflows.js';
import type { Workflows } from './port.js';

/**
 * The Workflows contract, run by each adapter's test file against that adapter (Step Functions at its wire
 * boundary, the local ASL runner with stand-in steps).
 */
export function workflowsContract(name: string, make: () => Workflows): void {
  describe(`${name} honours the Workflows contract`, () => {
    test.each(['deploy', 'teardown', 'redeployApp'] as WorkflowName[])(
      'start(%s) returns at once with an execution id, a distinct one per execution name',
      async (workflow) => {
        const wf = make();
        const input = { orgId: 'o', envKey: 'acme/shop#1', generation: 1, app: 'web', mode: 'restart' };
        const a = await wf.start(workflow, input, `${workflow}-a`);
        const b = await wf.start(workflow, input, `${workflow}-b`);
        expect(a.executionId).toEqual(expect.any(String));
        expect(a.executionId.length).toBeGreaterThan(0);
        expect(b.executionId).not.toBe(a.executionId);
      },
    );

    test('completing a task nobody waits on (ended, or never issued) is ignored, success or failure', async () => {
      const wf = make();
      await expect(wf.completeTask('no-such-token', { ok: true, output: {} })).resolves.toBeUndefined();
      await expect(
        wf.completeTask('no-such-token', { ok: false, error: 'DeployFailed', cause: 'x' }),
      ).resolves.toBeUndefined();
    });

    test('a heartbeat for a task nobody waits on says it is gone', async () => {
      await expect(make().heartbeat('no-such-token')).resolves.toBe(false);
    });
  });
}
