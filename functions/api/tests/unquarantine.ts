import * as z from 'zod/mini';
import { unquarantineTest } from '../../core/gate/index.js';
import { rowId } from '../../shared/validation.js';
import { route } from '../route.js';

const params = z.object({ test_id: rowId });

/** DELETE /test/{test_id}/quarantine: end a test's quarantine now (200, the quarantine ended; 404: none). */
export const { main, handler } = route('unquarantineTest', { params }, async (req) => ({
  statusCode: 200,
  body: { ...(await unquarantineTest(req.principal.orgId, req.params.test_id)), ended: true },
}));
