import { config } from '../../shared/config.js';
import { S3Artifacts } from '../artifacts/s3.js';
import { adapter, required } from './adapters.js';
import { s3Client } from './aws-clients.js';

/** Staged source archives (AWS: the artifacts bucket, ARTIFACTS_BUCKET, through the S3 client). */
export const artifacts = /* @__PURE__ */ adapter(
  'artifacts',
  () => new S3Artifacts(s3Client(), required(config().artifactsBucket, 'ARTIFACTS_BUCKET')),
);
