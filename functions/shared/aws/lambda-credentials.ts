/**
 * The AWS credentials of a deployed Lambda: what every bundled SDK client gets in place of the SDK's
 * default provider chain. `lib/cdk/bundling.ts` aliases `@aws-sdk/credential-provider-node` to this module
 * in every Lambda bundle (and the bundle benchmark measures the same build); nothing imports it directly.
 *
 * Why the environment is enough: Lambda puts the execution role's temporary credentials in the function's
 * environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) before the handler
 * module loads, and keeps them valid for the life of the execution environment. The default chain tries
 * the environment first too, so in Lambda it always stopped there, and the rest of it was dead weight in
 * each bundle (about 130 KB minified: the SSO, INI/profile, process, web-identity, container and IMDS
 * providers with the STS/SSO clients they carry).
 *
 * What it gives up, none of which exists in Lambda: `AWS_PROFILE` and the shared config/credentials files,
 * SSO sessions, `credential_process`, web-identity token files, the ECS container endpoint and EC2
 * instance metadata. Code that runs unbundled (the local server, the test tiers, the CLI) imports the real
 * package and keeps the whole chain. Missing variables fail the first AWS call with the SDK's own
 * `CredentialsProviderError` ("Unable to find environment variable credentials."), never a silent
 * anonymous request.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';

/** Same name and shape as `@aws-sdk/credential-provider-node`'s export, which SDK clients import. */
export const defaultProvider = (init: Parameters<typeof fromEnv>[0] = {}): ReturnType<typeof fromEnv> =>
  fromEnv(init);
