import * as z from 'zod/mini';
import { appName, envVarKey, rowId } from '../../shared/validation.js';

/** `{applicationId}/{app}` of a secret bundle. */
export const bundlePath = z.object({ applicationId: rowId, app: appName });
export const keyPath = z.extend(bundlePath, { key: envVarKey });
export const secretValue = z.string({ message: 'value must be a string' }).check(z.maxLength(65_536));
