import { describe, expect, test } from '@jest/globals';
import { clusterContext, type Json, logicalIdOf, resourcesOf, statementsOf, synthesize } from './synth.js';

// The access verifier of protected previews (lib/cdk/constructs/access-verifier.ts): with a
// cluster only, behind an anonymous function URL, reading the applications' access keys and nothing else.
const none = synthesize();
const full = synthesize(clusterContext);

describe('access verifier', () => {
  test('absent without a cluster', () => {
    expect(none.stateless.accessVerifier).toBeUndefined();
    expect(Object.keys(resourcesOf(none.statelessTemplate, 'AWS::Lambda::Url'))).toEqual([]);
  });

  test('its grants: GetSecretValue of <prefix>/*/_access-?????? only', () => {
    const verifier = full.stateless.accessVerifier!;
    const id = logicalIdOf(verifier.function);
    const statements = statementsOf(full.statelessTemplate, id);
    const resolved = full.stateless.resolve(statements) as { actions: string[]; resources: Json[] }[];
    const secretGrants = resolved.filter((s) => s.actions.some((a) => a.startsWith('secretsmanager:')));
    expect(secretGrants).toHaveLength(1);
    expect(secretGrants[0]!.actions).toEqual(['secretsmanager:GetSecretValue']);
    expect(JSON.stringify(secretGrants[0]!.resources)).toMatch(
      /:secret:preview\/[^"]*\/\*\/_access-\?\?\?\?\?\?/,
    );
    // Nothing else but what every function has (its log stream, X-Ray): no table, no other secret, no cluster.
    const others = resolved.flatMap((s) => s.actions).filter((a) => !a.startsWith('secretsmanager:'));
    expect(others.filter((a) => !/^(xray|logs):/.test(a))).toEqual([]);
  });

  test('an anonymous function URL, whose address the cluster callers get as ACCESS_VERIFIER_URL', () => {
    const urls = Object.values(resourcesOf(full.statelessTemplate, 'AWS::Lambda::Url'));
    expect(urls).toHaveLength(1);
    expect(urls[0].Properties.AuthType).toBe('NONE');
    const fnId = logicalIdOf(full.stateless.accessVerifier!.function);
    expect(JSON.stringify(urls[0].Properties.TargetFunctionArn)).toContain(fnId);
    for (const [name, fn] of full.stateless.clusterCallers()) {
      const env = resourcesOf(full.statelessTemplate, 'AWS::Lambda::Function')[logicalIdOf(fn)].Properties
        .Environment.Variables;
      expect([name, JSON.stringify(env.ACCESS_VERIFIER_URL ?? null)]).toEqual([
        name,
        expect.stringContaining('FunctionUrl'),
      ]);
    }
  });
});
