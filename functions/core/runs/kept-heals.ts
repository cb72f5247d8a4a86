import { NotFoundError, ValidationError } from '../../shared/errors.js';
import { MASK } from '../../shared/masking/mask.js';
import { findTest, rewriteStepElements, type StepElement } from '../test-definitions/index.js';
import { loadRun } from './store.js';

/*
 * Keeping a run's heals (`previewctl tests heal --run RUN_ID`): the selectors a passed run's healed steps
 * acted on, and those elements' outer HTML, written into its test's steps, so its next run needs no
 * healing. The diff first; written only when asked.
 */

/** One step of the test that changes: its recorded element, and the healed one. */
export interface KeptHeal {
  /** 1-based, as runs and reports number steps. */
  step: number;
  stepId: string;
  interaction: string;
  from: StepElement;
  to: StepElement;
  score: number;
}

/** What keeping a run's heals would change (or changed) in its test. */
export interface HealPlan {
  runId: string;
  testId: string;
  testName: string;
  changes: KeptHeal[];
  /** Healed steps not kept, each with why (the test changed since the run, a masked selector). */
  skipped: { step: number; stepId: string; reason: string }[];
  written: boolean;
}

/**
 * The run's heals as changes to its test. Steps: read the run (another organization's is not found);
 * only a passed run's heals are kept (a heal is trusted when the whole run passed with it); read its
 * test; for each healed step, the test's step of the same id, still recorded with the selector that
 * matched nothing, gets the healed selector and the element's outer HTML when the run stored it; a step
 * gone from the test, one whose selector changed since, or a healed selector holding a masked secret
 * value is skipped, saying why.
 */
export async function planKeptHeals(orgId: string, runId: string): Promise<HealPlan> {
  const run = await loadRun(runId);
  if (!run || run.orgId !== orgId) throw new NotFoundError('run not found');
  if (run.status !== 'passed')
    throw new ValidationError(
      `run ${runId} is ${run.status}: heals are kept only from a passed run (its healed steps led to a pass)`,
    );
  const test = await findTest(orgId, run.testId).catch((err) => {
    if (err instanceof NotFoundError) throw new NotFoundError(`the run's test ${run.testId} is gone`);
    throw err;
  });
  const plan: HealPlan = {
    runId,
    testId: test.testId,
    testName: test.name,
    changes: [],
    skipped: [],
    written: false,
  };
  for (const [i, s] of run.steps.entries()) {
    if (!s.healed) continue;
    const step = i + 1;
    const own = test.steps.find((t) => t.id === s.id);
    const skip = (reason: string) => plan.skipped.push({ step, stepId: s.id, reason });
    if (!own) skip('the step is no longer in the test');
    else if (own.element.selector !== s.healed.from)
      skip(`the test's selector is ${JSON.stringify(own.element.selector)} now, not the one healed`);
    else if (s.healed.to.includes(MASK)) skip('the healed selector holds a secret value (masked): not kept');
    else
      plan.changes.push({
        step,
        stepId: s.id,
        interaction: s.interaction,
        from: { selector: own.element.selector, html: own.element.html },
        to: { selector: s.healed.to, html: s.healed.html ?? own.element.html },
        score: s.healed.score,
      });
  }
  return plan;
}

/** Plan (see planKeptHeals), then write the changes into the test's steps in one conditional write. */
export async function keepHeals(orgId: string, runId: string): Promise<HealPlan> {
  const plan = await planKeptHeals(orgId, runId);
  if (!plan.changes.length) return plan;
  const test = await findTest(orgId, plan.testId);
  await rewriteStepElements(
    orgId,
    plan.testId,
    plan.changes.map((c) => ({
      index: test.steps.findIndex((t) => t.id === c.stepId),
      id: c.stepId,
      from: c.from.selector,
      element: c.to,
    })),
  );
  return { ...plan, written: true };
}
