import type { DeployInputs } from './types.js';

/*
 * The order of source-host events per environment (docs/cloud-path.md, "The order of pull request
 * events"). EventBridge does not promise order and delivers at least once, so each event carries a key and
 * the write that acts on it checks and records that key in one conditional update: an event older than
 * the last one acted on is stale (a push that arrives after the close is ignored), and so is one acted on
 * already (a redelivery).
 *
 * The key is the pull request's `updated_at`, which GitHub gives to the second; a close sorts after an
 * update of the same second (teardown wins a tie). Two updates in the same second (a bot opening and
 * pushing at once, a quick force-push) have equal keys: the second is acted on only when its head differs
 * from the recorded one and the source host says it is the pull request's head now (`breaksTie`), then
 * with a second conditional update that requires the key to be still the same and the head still
 * another (`SAME_KEY_OTHER_HEAD`), so a racing copy of the same event acts once.
 */

/** An event's ordering key: its `updated_at`, a close sorting after an update of the same second. */
export const orderKey = (eventAt: string, closed: boolean): string =>
  closed ? `${eventAt}|closed` : eventAt;

/**
 * What a write that acts on a source-host event is told about it: its key (`orderKey`) and, for a pull
 * request update, its head and how to ask the source host whether that head is the pull request's head
 * now (asked only on a same-second tie).
 */
export interface SourceOrder {
  order?: string;
  head?: { sha: string; isCurrent: () => Promise<boolean> };
}

/** The condition of an event's first write: no key recorded, or an older one. */
export const NEWER_SOURCE_EVENT = 'attribute_not_exists(sourceEventAt) OR sourceEventAt < :order';
/** The condition of a tie's write: the same key still recorded, with another head than the event's. */
export const SAME_KEY_OTHER_HEAD = 'sourceEventAt = :order AND inputs.headSha <> :head';

/**
 * What an update adds to record a source event's order, when it has one: the SET clause, its condition
 * (beside the update's own `condition`) and its values. `tieHead`: the write of a tie (`SAME_KEY_OTHER_HEAD`
 * with that head) instead of an event's first write.
 */
export function ordered(order: string | undefined, condition?: string, tieHead?: string) {
  if (order === undefined)
    return { set: '', ...(condition ? { ConditionExpression: condition } : {}), values: {} };
  const rule = tieHead === undefined ? NEWER_SOURCE_EVENT : SAME_KEY_OTHER_HEAD;
  return {
    set: ', sourceEventAt = :order',
    ConditionExpression: condition ? `${condition} AND (${rule})` : rule,
    values: { ':order': order, ...(tieHead === undefined ? {} : { ':head': tieHead }) },
  };
}

/**
 * Whether an update refused as not newer than the recorded event is to be acted on after all: the
 * recorded key is the same second's update (not a close, not a later event), the recorded head is another
 * one (the same head is a redelivery: a no-op), and the source host says the event's head is the pull
 * request's head now (so of two same-second heads the newer wins, whichever arrives first). The source
 * host is asked only in that case.
 */
export async function breaksTie(
  recorded: { sourceEventAt?: string; inputs?: Pick<DeployInputs, 'headSha'> } | undefined,
  event: Pick<SourceOrder, 'head'> & { order: string },
): Promise<boolean> {
  const head = event.head;
  const recordedHead = recorded?.inputs?.headSha;
  if (!head || recorded?.sourceEventAt !== event.order || recordedHead === undefined) return false;
  if (recordedHead.toLowerCase() === head.sha.toLowerCase()) return false;
  return head.isCurrent();
}

/** An event older than (or the same as) the last one the environment acted on: nothing was done. */
export class StaleEvent extends Error {
  override readonly name = 'StaleEvent';
  constructor() {
    super('a later or the same source event was already acted on');
  }
}
