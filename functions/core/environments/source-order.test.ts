import { describe, expect, test } from '@jest/globals';
import { breaksTie, NEWER_SOURCE_EVENT, ordered, orderKey, SAME_KEY_OTHER_HEAD } from './source-order.js';

/*
 * The order of pull request events (core/environments/source-order.ts): keys, the tie rule, the conditions
 * written.
 */

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const T = '2030-01-01T10:00:00Z';

/** A head whose `isCurrent` answers `current` and counts the questions. */
function head(sha: string, current: boolean) {
  const asked: string[] = [];
  return {
    asked,
    head: {
      sha,
      isCurrent: async () => {
        asked.push(sha);
        return current;
      },
    },
  };
}

describe('orderKey', () => {
  test('later seconds sort after earlier ones; a close after an update of its second, before the next second', () => {
    const keys = [
      orderKey('2030-01-01T10:00:01Z', false),
      orderKey(T, true),
      orderKey(T, false),
      orderKey('2030-01-01T10:00:01Z', true),
    ];
    expect([...keys].sort()).toEqual([
      T,
      `${T}|closed`,
      '2030-01-01T10:00:01Z',
      '2030-01-01T10:00:01Z|closed',
    ]);
    // The same second's two updates have equal keys: the tie `breaksTie` settles.
    expect(orderKey(T, false)).toBe(orderKey(T, false));
  });
});

describe('breaksTie', () => {
  test("a same-second update with another head that is the pull request's head now: acted on", async () => {
    const b = head(B, true);
    expect(await breaksTie({ sourceEventAt: T, inputs: { headSha: A } }, { order: T, head: b.head })).toBe(
      true,
    );
    expect(b.asked).toEqual([B]);
  });

  test('the same second, another head, but not the head now (the older of the two): stale', async () => {
    const a = head(A, false);
    expect(await breaksTie({ sourceEventAt: T, inputs: { headSha: B } }, { order: T, head: a.head })).toBe(
      false,
    );
    expect(a.asked).toEqual([A]);
  });

  test('a redelivery (same second, same head, any case): stale, and the source host is not asked', async () => {
    const b = head(B, true);
    expect(
      await breaksTie({ sourceEventAt: T, inputs: { headSha: B.toUpperCase() } }, { order: T, head: b.head }),
    ).toBe(false);
    expect(b.asked).toEqual([]);
  });

  test('a close of the same second, a later event, nothing recorded: no tie, the source host is not asked', async () => {
    const b = head(B, true);
    const inputs = { headSha: A };
    expect(await breaksTie({ sourceEventAt: orderKey(T, true), inputs }, { order: T, head: b.head })).toBe(
      false,
    );
    expect(
      await breaksTie({ sourceEventAt: '2030-01-01T10:00:01Z', inputs }, { order: T, head: b.head }),
    ).toBe(false);
    expect(await breaksTie(undefined, { order: T, head: b.head })).toBe(false);
    expect(await breaksTie({ sourceEventAt: T }, { order: T, head: b.head })).toBe(false);
    // An event without a head (a close) never breaks a tie.
    expect(await breaksTie({ sourceEventAt: T, inputs }, { order: T })).toBe(false);
    expect(b.asked).toEqual([]);
  });
});

describe('ordered: what the conditional write checks and records', () => {
  test("an event's first write: newer than the recorded key, beside the update's own condition", () => {
    expect(ordered(T, 'attribute_exists(envKey)')).toEqual({
      set: ', sourceEventAt = :order',
      ConditionExpression: `attribute_exists(envKey) AND (${NEWER_SOURCE_EVENT})`,
      values: { ':order': T },
    });
    expect(NEWER_SOURCE_EVENT).toBe('attribute_not_exists(sourceEventAt) OR sourceEventAt < :order');
  });

  test("a tie's write: the same key still recorded, with another head than the event's", () => {
    expect(ordered(T, undefined, B)).toEqual({
      set: ', sourceEventAt = :order',
      ConditionExpression: SAME_KEY_OTHER_HEAD,
      values: { ':order': T, ':head': B },
    });
    expect(SAME_KEY_OTHER_HEAD).toBe('sourceEventAt = :order AND inputs.headSha <> :head');
  });

  test('no order (an API request): nothing added', () => {
    expect(ordered(undefined)).toEqual({ set: '', values: {} });
    expect(ordered(undefined, 'x = :y')).toEqual({ set: '', ConditionExpression: 'x = :y', values: {} });
  });
});
