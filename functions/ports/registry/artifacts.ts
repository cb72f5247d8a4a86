import { S3Client } from '@aws-sdk/client-s3';
import { config } from '../../shared/config.js';
import { S3Artifacts } from '../artifacts/s3.js';
import { adapter, required } from './adapters.js';

/** Staged source archives (AWS: the artifacts bucket, ARTIFACTS_BUCKET). */
export const artifacts = /* @__PURE__ */ adapter(
  'artifacts',
  () =>
    new S3Artifacts(
      new S3Client({ region: config().region }),
      required(config().artifactsBucket, 'ARTIFACTS_BUCKET'),
    ),
);
