import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { fixturePath, keptTypes, statefulLogicalIds } from './stateful-ids.js';

/**
 * An upgrade replaces no resource that holds state: every bucket, secret, event bus, queue, log group,
 * table, key, topic and image repository of both stacks (and the policies on them, and the REST API with
 * what is under it: test/infra/stateful-ids.ts says why) keep the logical id recorded in
 * test/infra/fixtures/stateful-logical-ids.json (`npx tsx test/infra/stateful-ids.ts` rewrites it, for a
 * change that means to replace one and says so in the upgrade notes of docs/deploy-to-aws.md). The
 * stateless stack's output names are held too: operators and scripts read them after a deploy.
 */
describe('stateful logical ids', () => {
  const recorded = JSON.parse(readFileSync(fixturePath, 'utf8')) as ReturnType<typeof statefulLogicalIds>;
  const now = statefulLogicalIds();

  it('records both variants, with every kept kind the stacks create', () => {
    expect(Object.keys(now).sort()).toEqual(Object.keys(recorded).sort());
    const kinds = new Set(
      Object.values(recorded).flatMap((v) => [...v.stateful, ...v.stateless].map((e) => e.split(' ')[0])),
    );
    expect([...kinds].sort()).toEqual([...keptTypes].sort());
  });

  it.each(Object.keys(recorded))('%s: every stateful resource keeps its logical id', (variant) => {
    expect(now[variant]?.stateful).toEqual(recorded[variant]?.stateful);
    expect(now[variant]?.stateless).toEqual(recorded[variant]?.stateless);
  });

  it.each(Object.keys(recorded))('%s: the stateless stack keeps its output names', (variant) => {
    expect(now[variant]?.statelessOutputs).toEqual(recorded[variant]?.statelessOutputs);
  });
});
