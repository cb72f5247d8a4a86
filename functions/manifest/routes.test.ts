import { expect, test } from '@jest/globals';
import { MAX_RECIPES_FILE_BYTES } from '../core/recipes/versions.js';
import { routes } from './routes.js';

test("the recipe route's body cap is the recipe file limit of the use case", () => {
  expect(routes.createRecipeVersion.maxBodyBytes).toBe(MAX_RECIPES_FILE_BYTES);
});
