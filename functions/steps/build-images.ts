import { beginAppStep, type CallbackEvent, isCurrent } from '../core/environments/index.js';
import { imageBuilder } from '../ports/registry/runtime/image-builder.js';

/**
 * Build step (building / building-images), a callback task: start the runtime's build of every app (or
 * the one app of a rebuild) at the environment's head SHA and return. The runtime ends the task through
 * the token when the builds finish, so a 30-minute build costs the state machine no more transitions
 * than a 10-second one. Fenced by generation like every step: refused (`Superseded`) when a newer request
 * or a teardown owns the environment, here and again by the runtime right before it starts a build.
 */
export async function handler(event: CallbackEvent): Promise<void> {
  const { input, taskToken } = event;
  const { env, apps, target } = await beginAppStep(input, { status: 'building', phase: 'building-images' });
  await imageBuilder().build(target, env.inputs!.headSha, apps, taskToken, {
    rebuild: input.mode === 'rebuild',
    ...(env.buildInputs ? { inputs: env.buildInputs } : {}),
    current: () => isCurrent(input),
  });
}
