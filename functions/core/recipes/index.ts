/*
 * Scenario recipes, the front of the domain: a setup's versions, each an uploaded recipes file, validated
 * (versions.ts), and the short id a recipe's tokens use.
 */

export { createRecipeVersion, getRecipeVersion, listRecipeVersions, testRunShortId } from './versions.js';
