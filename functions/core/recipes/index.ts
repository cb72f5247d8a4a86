export { createRecipeVersion, getRecipeVersion, listRecipeVersions, testRunShortId } from './versions.js';
