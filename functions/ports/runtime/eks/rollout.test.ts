import { describe, expect, test } from '@jest/globals';
import type { V1Deployment } from '@kubernetes/client-node';
import { rolloutState } from './rollout.js';

describe('rollout status', () => {
  const d = (status: object, generation = 2) =>
    ({ metadata: { generation }, spec: { replicas: 1 }, status }) as unknown as V1Deployment;
  test('is ready only as kubectl rollout status means it', () => {
    expect(
      rolloutState(d({ observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1 })),
    ).toMatchObject({
      state: 'progressing',
    });
    expect(
      rolloutState(d({ observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: 2 })),
    ).toMatchObject({
      state: 'progressing',
      detail: '1 old replica(s) pending termination',
    });
    expect(
      rolloutState(d({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 0 })),
    ).toMatchObject({
      state: 'progressing',
    });
    expect(
      rolloutState(d({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, availableReplicas: 1 })),
    ).toEqual({
      state: 'ready',
    });
  });
});
