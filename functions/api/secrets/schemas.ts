import * as z from 'zod';
import { appName, envVarKey, rowId } from '../../shared/validation.js';

/** `{applicationId}/{app}` of a secret bundle. */
export const bundlePath = z.object({ applicationId: rowId, app: appName });
export const keyPath = bundlePath.extend({ key: envVarKey });
export const secretValue = z.string({ message: 'value must be a string' }).max(65_536);
