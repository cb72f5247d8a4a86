/**
 * The English issue messages classic zod loads by default (`Invalid input: expected string, received
 * number`, `Too small: expected string to have >=1 characters`), for `zod/mini`, which loads none: every
 * 400 that quotes a zod message reads the same. Imported for its effect by each module that validates
 * (functions/shared/validation.ts covers the handlers and use cases); only the English locale is bundled.
 */
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config(en());
