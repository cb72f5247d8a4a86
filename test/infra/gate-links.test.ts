import { describe, expect, test } from '@jest/globals';
import { declaredFunctions, type Json, resourcesOf, statementsOf, synthesize } from './synth.js';

/*
 * The merge gate's links: the operator's `publicUrl` reaches, as PUBLIC_URL, exactly the functions that
 * bring the gate (`gateLinks` access), which read the link-signing secret (the report's signed links;
 * a failed step's screenshot is the report at that step) and no media beyond what they declare.
 * Without it no function has PUBLIC_URL: the gate mints no link.
 */
const plain = synthesize();
const linked = synthesize({ publicUrl: 'https://previews.example.com/v1/' });

const envOf = (template: typeof plain.statelessTemplate, id: string): Record<string, Json> =>
  resourcesOf(template, 'AWS::Lambda::Function')[id].Properties.Environment.Variables;
const readsMedia = (template: typeof plain.statelessTemplate, id: string) =>
  statementsOf(template, id).some((s) => s.actions.includes('s3:GetObject'));

describe('publicUrl set', () => {
  const declared = declaredFunctions(linked.stateless);

  test('some functions bring the gate', () => {
    expect(declared.filter(([, fn]) => fn.access.gateLinks).length).toBeGreaterThanOrEqual(6);
  });

  test('a failed preview and a teardown link no report (their environments are at 4 KB)', () => {
    const linking = declared.filter(([, fn]) => fn.access.gateLinks).map(([name]) => name);
    expect(linking).toEqual(expect.arrayContaining(['step functions/steps/run-execute.ts']));
    expect(linking).not.toContain('step functions/steps/tear-down.ts');
    expect(linking).not.toContain('step functions/steps/mark-failed.ts');
  });

  test.each(declared)('%s has PUBLIC_URL (and the link key) exactly when it declares gateLinks', (_, fn) => {
    const env = envOf(linked.statelessTemplate, fn.id);
    if (fn.access.gateLinks) {
      expect(env.PUBLIC_URL).toBe('https://previews.example.com/v1');
      expect(env.RUN_LINK_SECRET_ARN).toBeDefined();
      // No media read for the gate's links: only what `media` declares.
      const declaresRead = fn.access.media === 'R' || fn.access.media === 'RW';
      expect(readsMedia(linked.statelessTemplate, fn.id)).toBe(declaresRead);
    } else {
      expect(env.PUBLIC_URL).toBeUndefined();
    }
  });

  test('the run executor writes media, reads none, and signs report links with the link key', () => {
    const [, executor] = declared.find(([name]) => name === 'step functions/steps/run-execute.ts')!;
    const actions = statementsOf(linked.statelessTemplate, executor.id).flatMap((s) => s.actions);
    expect(actions).toEqual(expect.arrayContaining(['s3:PutObject', 'secretsmanager:GetSecretValue']));
    expect(actions).not.toContain('s3:GetObject');
  });
});

describe('publicUrl unset', () => {
  const declared = declaredFunctions(plain.stateless);
  test.each(declared)('%s has no PUBLIC_URL; gateLinks still has the link key', (_, fn) => {
    const env = envOf(plain.statelessTemplate, fn.id);
    expect(env.PUBLIC_URL).toBeUndefined();
    if (fn.access.gateLinks) expect(env.RUN_LINK_SECRET_ARN).toBeDefined();
  });
});

test.each([
  ['http://previews.example.com', /https URL/],
  ['https://previews.example.com/?stage=1', /https URL/],
  ['previews.example.com', /https URL/],
])('rejects publicUrl %s', (publicUrl, message) => {
  expect(() => synthesize({ publicUrl })).toThrow(message);
});
