/*
 * Scenario data, the front of the domain: the application's Environment Factory, its signing secret and
 * the signed client that sends it `up` and `down` (factory.ts); the recipe a test's scenario names
 * (recipe.ts); what a run records of its scenario, and the one right to send its `down` (state.ts).
 */

export {
  callFactory,
  downPayload,
  ensureFactorySecret,
  FACTORY_SECRET_VAR,
  type FactoryClientOptions,
  type FactoryLocation,
  factorySecret,
  factoryUrl,
  noFactorySecret,
  parseUpAnswer,
  rotateFactorySecret,
  sendOwedDown,
  substituteTokens,
  type UpAnswer,
  upPayload,
} from './factory.js';
export { loadScenarioRecipe, type ScenarioRef, scenarioRefProblems } from './recipe.js';
export {
  claimDown,
  readScenarioState,
  releaseDownClaim,
  type ScenarioState,
  saveScenarioState,
  scenarioMetadata,
} from './state.js';
