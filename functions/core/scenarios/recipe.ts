import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { ddb, table } from '../../shared/aws/dynamo.js';

/*
 * The recipe a test's scenario names (README "Scenario data"): checked when the tests file is imported,
 * loaded when a run provisions its scenario. Read from table `recipes`, which the recipes domain writes.
 */

/** What a test names (tests file `scenario`). */
export interface ScenarioRef {
  setupId: string;
  recipe: string;
  /** Pinned version; the setup's latest when absent. */
  version?: number;
}

interface SetupHeader {
  orgId: string;
  latestVersion?: number;
}

/** The setup's header when it is the org's, else undefined. */
async function setupOf(orgId: string, setupId: string): Promise<SetupHeader | undefined> {
  const { Item } = await ddb().send(
    new GetCommand({ TableName: table('recipes'), Key: { setupId, version: 0 }, ConsistentRead: true }),
  );
  const header = Item as SetupHeader | undefined;
  return header && header.orgId === orgId ? header : undefined;
}

/** A recipe as loaded for a run. */
export interface LoadedRecipe {
  setupId: string;
  version: number;
  name: string;
  create: Record<string, unknown>;
}

/**
 * The recipe a scenario names: its setup must be the org's, the version (latest unless pinned) must exist
 * and hold a recipe of that name; otherwise a message saying which is missing.
 */
export async function loadScenarioRecipe(
  orgId: string,
  ref: ScenarioRef,
): Promise<{ recipe: LoadedRecipe } | { error: string }> {
  const header = await setupOf(orgId, ref.setupId);
  if (!header) return { error: `no setup ${ref.setupId} in this organization` };
  const version = ref.version ?? header.latestVersion ?? 0;
  const { Item } = await ddb().send(
    new GetCommand({
      TableName: table('recipes'),
      Key: { setupId: ref.setupId, version },
      ConsistentRead: true,
    }),
  );
  if (!Item || version < 1) return { error: `setup ${ref.setupId} has no version ${version}` };
  let file: { recipes?: { name?: string; create?: Record<string, unknown> }[] };
  try {
    file = JSON.parse(String(Item.fileJson));
  } catch {
    return { error: `setup ${ref.setupId} version ${version} is not readable` };
  }
  const recipe = file.recipes?.find((r) => r.name === ref.recipe);
  if (!recipe) return { error: `setup ${ref.setupId} version ${version} has no recipe "${ref.recipe}"` };
  return { recipe: { setupId: ref.setupId, version, name: ref.recipe, create: recipe.create ?? {} } };
}

/**
 * Import check: a problem `[i].scenario: …` for each test whose scenario names
 * nothing of the organization (the caller answers them all in one 400).
 */
export async function scenarioRefProblems(
  orgId: string,
  scenarios: { index: number; ref: ScenarioRef }[],
): Promise<string[]> {
  const problems: string[] = [];
  for (const { index, ref } of scenarios) {
    const loaded = await loadScenarioRecipe(orgId, ref);
    if ('error' in loaded) problems.push(`[${index}].scenario: ${loaded.error}`);
  }
  return problems;
}
