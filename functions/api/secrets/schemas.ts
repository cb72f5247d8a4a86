import * as z from 'zod/mini';
import { appName, envVarKey, rowId } from '../../shared/validation.js';

/** `{applicationId}/{app}` of a secret bundle. */
export const bundlePath = z.object({ applicationId: rowId, app: appName });
export const keyPath = z.extend(bundlePath, { key: envVarKey });
/** The longest secret value, in characters. */
export const MAX_SECRET_VALUE_LENGTH = 65_536;
// The length check names its own message: a schema-level one would answer an over-long value with
// `value must be a string` too.
export const secretValue = z
  .string({ error: (issue) => (issue.code === 'invalid_type' ? 'value must be a string' : undefined) })
  .check(z.maxLength(MAX_SECRET_VALUE_LENGTH, `value must be at most ${MAX_SECRET_VALUE_LENGTH} characters`));
