import { ArnFormat, CfnOutput, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { Tables } from '../access.js';
import { acknowledgeWildcardResource } from '../nag.js';
import { ServiceFunction } from './service-function.js';

/** The verifier's handler: a function URL, in no manifest (test/bench/bundles.ts budgets it by this). */
export const ACCESS_VERIFIER_ENTRY = 'functions/api/access/verify.ts';

/** The application's access key's bundle name (functions/core/access.ts `ACCESS_KEY_APP`). */
const ACCESS_KEY_APP = '_access';

export interface AccessVerifierProps {
  tables: Tables;
  /** Where secret bundles live (SECRET_NAME_PREFIX): the access keys are `<prefix>/<applicationId>/_access`. */
  secretNamePrefix: string;
  logRetention: logs.RetentionDays;
}

/**
 * The access verifier of protected previews on EKS (functions/api/access/verify.ts): ingress-nginx's
 * external auth asks it about each visitor of a protected app (`auth-url`, eks/front-door.ts), so it must
 * answer without the service's authentication. A Lambda function URL (auth NONE), not a route of the API:
 * the API authenticates every route with the organization's token and describes itself in lib/openapi.ts,
 * neither of which fits an anonymous subrequest, and a function URL costs no API Gateway request per check.
 * It reveals nothing but 200 or 401 (no key, no token in an answer). Its only grant: GetSecretValue of the
 * applications' access keys (`<prefix>/*\/_access-*`), no table, no other secret.
 */
export class AccessVerifier extends Construct {
  readonly function: ServiceFunction;
  /** `https://<id>.lambda-url.<region>.on.aws/`: ACCESS_VERIFIER_URL of the cluster's callers. */
  readonly url: string;

  constructor(scope: Construct, id: string, props: AccessVerifierProps) {
    super(scope, id);
    this.function = new ServiceFunction(this, 'AccessVerifierFunction', {
      entry: ACCESS_VERIFIER_ENTRY,
      kind: 'api',
      tables: props.tables,
      secretNamePrefix: props.secretNamePrefix,
      logRetention: props.logRetention,
      description: "Answer ingress-nginx's external auth of protected previews (access cookie or link)",
      timeout: Duration.seconds(5),
    });
    const keys = Stack.of(this).formatArn({
      service: 'secretsmanager',
      resource: 'secret',
      // Secrets Manager appends `-` and six random characters to a secret's name in its ARN.
      resourceName: `${props.secretNamePrefix}/*/${ACCESS_KEY_APP}-??????`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [keys] }),
    );
    if (this.function.role)
      acknowledgeWildcardResource(
        this.function.role,
        keys,
        'Access keys are named <secretNamePrefix>/<applicationId>/_access, the application known only at run ' +
          'time; the grant is GetSecretValue of those secrets alone.',
      );
    const fnUrl = this.function.addFunctionUrl({ authType: lambda.FunctionUrlAuthType.NONE });
    this.url = fnUrl.url;
    new CfnOutput(this, 'Url', {
      value: fnUrl.url,
      description: 'The access verifier ingress-nginx asks about visitors of protected previews',
    });
  }
}
