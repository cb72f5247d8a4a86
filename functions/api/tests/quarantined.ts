import * as z from 'zod/mini';
import { listQuarantined } from '../../core/gate/index.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const query = z.object({ application_id: z.optional(rowId) });

/** GET /quarantine[?application_id=ID]: the organization's quarantined tests whose quarantine holds. */
export const { main, handler } = route('listQuarantined', { query }, async (req) => ({
  statusCode: 200,
  body: {
    quarantined: await listQuarantined(
      req.principal.orgId,
      req.query.application_id !== undefined ? { applicationId: req.query.application_id } : {},
    ),
  },
}));
