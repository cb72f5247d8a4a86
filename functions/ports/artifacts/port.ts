/**
 * The Artifacts port: where source archives are staged for image builds. Adapters: `s3.ts` (the artifacts
 * bucket, in AWS mode), `local-files.ts` (files under the data dir). Keys come from `artifactKeys` in
 * manifest/tables.ts.
 */
import type { Readable } from 'node:stream';

export interface Artifacts {
  /** Whether an object exists under `key`. */
  exists(key: string): Promise<boolean>;
  /** Store the stream under `key` (replacing what was there); resolves once it is durable. */
  put(key: string, body: Readable, contentType: string): Promise<void>;
  /** Where a consumer (an image build) finds the object: `s3://bucket/key`, or a local path. */
  location(key: string): string;
}
