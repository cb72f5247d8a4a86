import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ddb, isConditionFailure, table } from '../../shared/aws/dynamo.js';
import { ConflictError, PayloadTooLargeError } from '../../shared/errors.js';
import { findTest, MAX_TEST_BYTES, type StepElement } from './definitions.js';

/** A step's element to write: the step at `index` with id `id`, still recorded as `from`, becomes `element`. */
export interface StepElementChange {
  index: number;
  id: string;
  from: string;
  element: StepElement;
}

/**
 * Write new elements (selector and outer HTML) into a test's steps (`previewctl tests heal --write`).
 * Steps: read the test (another organization's is not found); refuse a test that would outgrow
 * MAX_TEST_BYTES; update the steps in one conditional write, each still at its index with its id and
 * the selector the caller saw (a test changed meanwhile is a ConflictError: nothing is written).
 */
export async function rewriteStepElements(
  orgId: string,
  testId: string,
  changes: StepElementChange[],
): Promise<void> {
  if (!changes.length) return;
  const test = await findTest(orgId, testId);
  const steps = test.steps.map((s) => ({ ...s, element: { ...s.element } }));
  for (const c of changes) if (steps[c.index]) steps[c.index]!.element = { ...c.element };
  if (Buffer.byteLength(JSON.stringify({ ...test, steps })) > MAX_TEST_BYTES)
    throw new PayloadTooLargeError(`the test would be larger than ${MAX_TEST_BYTES} bytes: nothing written`);
  const sets: string[] = [];
  const conds = ['orgId = :org'];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = { ':org': orgId };
  for (const [n, c] of changes.entries()) {
    const at = `steps[${c.index}]`;
    sets.push(`${at}.#element = :el${n}`);
    conds.push(`${at}.id = :id${n}`, `${at}.#element.selector = :from${n}`);
    names['#element'] = 'element';
    values[`:el${n}`] = { html: c.element.html, selector: c.element.selector };
    values[`:id${n}`] = c.id;
    values[`:from${n}`] = c.from;
  }
  try {
    await ddb().send(
      new UpdateCommand({
        TableName: table('tests'),
        Key: { testId },
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: conds.join(' AND '),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
  } catch (err) {
    if (isConditionFailure(err))
      throw new ConflictError('the test changed since it was read: nothing written; run tests heal again');
    throw err;
  }
}
