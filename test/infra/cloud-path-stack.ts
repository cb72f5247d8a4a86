import { type EventRuleId, eventRules } from '../../functions/manifest/events.js';
import {
  declaredFunctions,
  grantsOf,
  type Json,
  logicalIdOf,
  resourcesOf,
  type Statement,
  statementsOf,
  synthesize,
} from './synth.js';

/**
 * The cloud path's stacks as its tests read them (cloud-path*.test.ts): one synthesis with the defaults,
 * the logical ids of what the cloud path adds (bucket, image build, repository, GitHub App secret, bus),
 * and each function's grants and environment.
 */
export const { stateful, stateless, statefulTemplate, statelessTemplate: template } = synthesize();
export const resources = template.toJSON().Resources as Record<string, Json>;
export const functions = resourcesOf(template, 'AWS::Lambda::Function');
export const bucketId = logicalIdOf(stateless.artifacts);
export const projectId = logicalIdOf(stateless.imageBuild.project);
export const buildLogsId = logicalIdOf(stateless.imageBuild.logGroup);
export const repositoryId = logicalIdOf(stateful.imageRepository);
export const secretId = logicalIdOf(stateful.githubAppSecret);
export const busId = logicalIdOf(stateless.eventBus);
export const ruleIds = Object.keys(eventRules) as EventRuleId[];
export const sorted = (values: string[]) => [...values].sort();

/** Every function of the stack with what its manifest entry (or entries, for a shared step) declares. */
export const declared = declaredFunctions(stateless);
export const envOf = (id: string): Record<string, Json> => functions[id].Properties.Environment.Variables;
export const statementsAbout = (id: string, match: (s: Statement) => boolean) =>
  statementsOf(template, id)
    .filter(match)
    .map((s) => ({ actions: sorted(s.actions), resources: s.resources }));
/** A function's grants that match, one per resource (whatever minimizePolicies merged), actions sorted. */
export const grantsAbout = (id: string, match: (s: Statement) => boolean) =>
  grantsOf(template, id)
    .filter(match)
    .map((s) => ({ actions: sorted(s.actions), resources: s.resources }));
