import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { keepStackLevelIds } from '../logical-ids.js';
import { acknowledge } from '../nag.js';

/** What one of the service's buckets holds and how long. */
export interface ExpiringBucketProps {
  /** How long an object stays: a whole number of days, at least one. */
  expiration: Duration;
  /** The prop that sets `expiration`, named when it is not a whole number of days. */
  expirationName: string;
  /** The id of the lifecycle rule that expires objects. */
  lifecycleRuleId: string;
  /**
   * Why the bucket has no server access log (cdk-nag AwsSolutions-S1), given the number of days its
   * objects live; the reason ends pointing at CloudTrail S3 data events.
   */
  withoutAccessLog: (days: number) => string;
}

/**
 * A bucket of short-lived objects (staged sources, test-run media): private (all public access blocked,
 * bucket-owner objects, no ACLs), encrypted with S3-managed keys (a presigned GET needs no KMS grant), TLS
 * 1.2+ only, unversioned, every object expiring after `expiration` and an incomplete multipart upload
 * aborted after a day. Retained when the stack goes (objects expire by themselves); no
 * `autoDeleteObjects`, whose custom-resource Lambda may delete every object of the bucket. It keeps the
 * logical id it had at the stack level.
 */
export function expiringBucket(scope: Construct, id: string, props: ExpiringBucketProps): s3.Bucket {
  const days = props.expiration.toDays({ integral: false });
  if (!Number.isInteger(days) || days < 1)
    throw new Error(`${props.expirationName} must be a whole number of days`);
  const bucket = new s3.Bucket(scope, id, {
    encryption: s3.BucketEncryption.S3_MANAGED,
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    versioned: false,
    removalPolicy: RemovalPolicy.RETAIN,
    lifecycleRules: [
      {
        id: props.lifecycleRuleId,
        enabled: true,
        expiration: props.expiration,
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
  });
  keepStackLevelIds(bucket);
  acknowledge(
    bucket,
    'AwsSolutions-S1',
    `${props.withoutAccessLog(days)} A server access log would need a second bucket of its own; for a ` +
      'per-request audit, enable CloudTrail S3 data events on this bucket.',
  );
  return bucket;
}
