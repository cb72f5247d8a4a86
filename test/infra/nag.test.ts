import { describe, expect, test } from '@jest/globals';
import { type App, type PolicyViolation, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { clusterContext, synthesize, verifierNetworkContext } from './synth.js';

/** Every acknowledgment in an app: where it is made, the rule (or finding) id and its reason. */
interface Acknowledgment {
  path: string;
  id: string;
  reason: string;
}
const acknowledgmentsOf = (app: App): Acknowledgment[] =>
  app.node.findAll().flatMap((construct: IConstruct) =>
    construct.node.metadata
      .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((entry) =>
        Object.entries(entry.data as Record<string, string>).map(([id, reason]) => ({
          path: construct.node.path,
          // aws-cdk-lib records an acknowledged id with its namespace, as cdk-nag reads it.
          id: id.replace(/^annotation::/i, ''),
          reason,
        })),
      ),
  );

/** `rule: construct paths`, one line per finding, readable in a failure. */
const describeViolations = (violations: PolicyViolation[]) =>
  violations.map(
    (v) => `${v.severity} ${v.ruleName}: ${v.violatingResources.map((r) => r.constructPath).join(', ')}`,
  );

// Prepare: the app as `cdk synth` builds it (Template.fromStack has synthesized both stacks), without and
// with a cluster (access entries, cluster grants).
describe.each([
  ['without a cluster', synthesize().app],
  ['with a cluster', synthesize(clusterContext).app],
  ["with a Gateway and the verifier's load balancer", synthesize(verifierNetworkContext).app],
])('cdk-nag AwsSolutionsChecks %s', (_, app) => {
  const acknowledgments = acknowledgmentsOf(app);

  test('reports no unacknowledged error or warning on either stack', () => {
    // Act
    const report = new AwsSolutionsChecks().validateScope(app);
    // Assess
    expect(describeViolations(report.violations)).toEqual([]);
    expect(report.success).toBe(true);
  });

  test('every acknowledgment is an AwsSolutions rule with a specific reason', () => {
    expect(acknowledgments.length).toBeGreaterThan(0);
    for (const { id, reason, path } of acknowledgments) {
      expect({ path, id, ok: /^AwsSolutions-[A-Z]+\d+(\[.+\])?$/.test(id) }).toEqual({ path, id, ok: true });
      expect({ path, id, reason: reason.length >= 80 }).toEqual({ path, id, reason: true });
    }
  });

  test('IAM4 and IAM5 are acknowledged finding by finding (the policy or the wildcard), never whole', () => {
    const granular = acknowledgments.filter((a) => /^AwsSolutions-IAM[45]\b/.test(a.id));
    expect(granular.length).toBeGreaterThan(0);
    for (const { id, path } of granular) {
      expect({
        path,
        id,
        ok: /^AwsSolutions-IAM4\[Policy::.+\]$|^AwsSolutions-IAM5\[Resource::.+\]$/.test(id),
      }).toEqual({
        path,
        id,
        ok: true,
      });
    }
  });

  test('every acknowledgment still matches a finding under its construct (none is stale)', () => {
    // Prepare: the same checks, blind to acknowledgments.
    const blind = new AwsSolutionsChecks();
    (blind as unknown as { isAcknowledged: () => boolean }).isAcknowledged = () => false;
    // Act
    const findings = blind.validateScope(app).violations;
    // Assess
    const stale = acknowledgments.filter(
      ({ path, id }) =>
        !findings.some(
          (f) =>
            f.ruleName === id &&
            f.violatingResources.some(
              (r) => r.constructPath === path || r.constructPath?.startsWith(`${path}/`),
            ),
        ),
    );
    expect(stale.map((a) => `${a.path}: ${a.id}`)).toEqual([]);
  });
});
