import { failureMessage, type StepInput, Superseded, transition } from '../core/pipeline.js';

/** Catch target of every state machine: record `failed` with the cause, unless a newer request owns it. */
export async function handler(input: StepInput): Promise<StepInput> {
  try {
    await transition(input, { status: 'failed', error: failureMessage(input.failure).slice(0, 1000) }, [
      'phase',
    ]);
  } catch (err) {
    if (!(err instanceof Superseded)) throw err;
  }
  return input;
}
