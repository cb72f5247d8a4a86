import { config } from '../../shared/config.js';
import { S3Objects, s3TargetFromEnv } from '../../shared/s3-objects.js';
import { S3Artifacts } from '../artifacts/s3.js';
import { adapter, required } from './adapters.js';

/** Staged source archives (AWS: the artifacts bucket, ARTIFACTS_BUCKET; no S3 client, see S3Objects). */
export const artifacts = /* @__PURE__ */ adapter('artifacts', () => {
  const c = config();
  return new S3Artifacts(
    new S3Objects(s3TargetFromEnv(c.region), required(c.artifactsBucket, 'ARTIFACTS_BUCKET')),
  );
});
