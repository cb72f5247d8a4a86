import {
  environmentAccessUrls,
  loadCurrent,
  reportStatus,
  type StepInput,
  serviceStates,
  transition,
} from '../core/environments/index.js';
import { attachRuns, gateKeyOf, gateLinks } from '../core/gate/index.js';
import { startPreviewRuns } from '../core/runs/index.js';
import { linkSigner } from '../ports/registry/link-signer.js';
import { prStatus } from '../ports/registry/pr-status.js';
import { secretStore } from '../ports/registry/secret-store.js';
import { workflows } from '../ports/registry/workflows.js';

/**
 * Last step: `ready` with every app's URL (from the readiness callback) and the SHA now deployed; the
 * status goes to the pull request (a protected preview's comment with its signed access links), and the
 * application's `run_on_preview` tests start against it, the merge gate's check run following them.
 */
export async function handler(input: StepInput & { ready: { urls: Record<string, string> } }) {
  const env = await loadCurrent(input);
  const { ready, ...rest } = input;
  // Ready means every service was too: the runtime waits for them (and their seed) before any app.
  const services = env.serviceSpecs ? { services: serviceStates(env.serviceSpecs, 'ready') } : {};
  await transition(
    rest,
    { status: 'ready', urls: ready.urls, lastDeployedSha: env.inputs!.headSha, ...services },
    ['phase', 'error', 'stoppedApps'],
  );
  // A protected preview's comment carries its signed access links (the front door).
  await reportStatus(
    { prStatus: prStatus(), accessUrls: (e) => environmentAccessUrls(e, e.urls ?? {}, secretStore()) },
    rest,
  );
  const gateKey = gateKeyOf(env);
  // Once per environment, head and deploy: a MarkReady Step Functions runs again gets the same runs back.
  const startKey = `${env.envKey}@${env.inputs!.headSha}#${input.generation}`;
  const runIds = await startPreviewRuns({ workflows: workflows() }, env, {
    startKey,
    ...(gateKey ? { gateKey } : {}),
  });
  // The merge gate: this head's check run, `in_progress` while these runs run.
  await attachRuns({ prStatus: prStatus(), links: gateLinks(linkSigner) }, env, runIds);
  return rest;
}
