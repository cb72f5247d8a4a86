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
