import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  EventBridgeClient,
  InternalException,
  PutEventsCommand,
  ResourceNotFoundException,
} from '@aws-sdk/client-eventbridge';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { mockClient } from 'aws-sdk-client-mock';
import { FakeAws } from '../../../test/cloud/fakes/aws.js';
import { ServiceUnavailableError } from '../../shared/errors.js';
import { setLogSink } from '../../shared/log.js';
import { TransientError } from '../../shared/step-errors.js';
import { EventBridgeBus } from './eventbridge.js';
import { eventDlqPath, LocalBus } from './local-bus.js';
import type { BusEvent, DeliveredEvent, EventBus } from './port.js';

/*
 * The EventBus contract, run against both adapters: the local in-process bus (for real: rules, target
 * modules, retries, the dead-letter file) and EventBridge through a real EventBridgeClient against the
 * AWS fake's PutEvents; what EventBridge answers on failure, at the SDK boundary (aws-sdk-client-mock).
 */

const REPO_ROOT = new URL('../../..', import.meta.url).pathname;
const logs: string[] = [];
setLogSink((l) => logs.push(l));

const event = (n: number): BusEvent => ({
  source: 'preview.test',
  detailType: 'Thing Happened',
  detail: { n, nested: { ok: true } },
});

/** A directory of target modules the local bus's rules point at; they record what they get. */
const dir = mkdtempSync(join(tmpdir(), 'preview-bus-'));
type Calls = { rule: string; event: DeliveredEvent }[];
const calls = (): Calls => ((globalThis as { __busCalls?: Calls }).__busCalls ??= []);
function target(name: string, body: string): string {
  writeFileSync(
    join(dir, `${name}.mjs`),
    `export async function handler(event) {
       const calls = (globalThis.__busCalls ??= []);
       calls.push({ rule: ${JSON.stringify(name)}, event });
       ${body}
     }`,
  );
  return `${name}.mjs`;
}
const rules = {
  ok: {
    pattern: { source: ['preview.test'], 'detail-type': ['Thing Happened'] },
    target: { entry: target('ok', 'return 1;') },
  },
  flaky: {
    pattern: { source: ['preview.test'], 'detail-type': ['Flaky Thing'] },
    target: {
      entry: target(
        'flaky',
        `const n = calls.filter((c) => c.rule === 'flaky' && c.event.id === event.id).length;
         if (n < 3) throw new Error('not yet (' + n + ')');`,
      ),
    },
  },
  broken: {
    pattern: { source: ['preview.test'], 'detail-type': ['Broken Thing'] },
    target: { entry: target('broken', `throw new Error('always broken');`) },
  },
  malformed: {
    pattern: { source: ['preview.test'], 'detail-type': ['Malformed Thing'] },
    target: {
      entry: target(
        'malformed',
        `const e = new Error('detail.n: expected number'); e.name = 'MalformedEvent'; throw e;`,
      ),
    },
  },
};

let aws: FakeAws;
const local = new LocalBus({ repoRoot: dir, dataDir: dir, rules, retryDelaysMs: [10, 20] });
beforeAll(async () => {
  aws = await new FakeAws(REPO_ROOT).start();
});
afterAll(async () => {
  await local.stop();
  await aws.stop();
  rmSync(dir, { recursive: true, force: true });
});

const credentials = { accessKeyId: 'AKIAFAKE', secretAccessKey: 'secret' };
/** A client as a Lambda's, pointed at the fake. */
const fakeClient = () => new EventBridgeClient({ region: 'eu-west-1', credentials, endpoint: aws.url });
const adapters: [string, () => EventBus][] = [
  ['LocalBus', () => local],
  ['EventBridgeBus', () => new EventBridgeBus(fakeClient(), 'preview-bus')],
];

describe.each(adapters)('%s', (_name, make) => {
  test('accepts events and returns one id per event', async () => {
    const { eventIds } = await make().put([event(1), event(2)]);
    expect(eventIds).toHaveLength(2);
    for (const id of eventIds) expect(id).toEqual(expect.any(String));
  });

  test('more than 10 events at once (PutEvents takes 10 per call)', async () => {
    const { eventIds } = await make().put(Array.from({ length: 23 }, (_, i) => event(i)));
    expect(eventIds).toHaveLength(23);
  });
});

describe('LocalBus', () => {
  test('delivers after put returns, in the shape EventBridge delivers, to the matching rule only', async () => {
    calls().length = 0;
    const { eventIds } = await local.put([event(7)]);
    expect(calls()).toEqual([]); // not yet: asynchronous, like an asynchronous Lambda invocation
    await local.idle();
    expect(calls()).toEqual([
      {
        rule: 'ok',
        event: {
          version: '0',
          id: eventIds[0],
          source: 'preview.test',
          'detail-type': 'Thing Happened',
          account: '000000000000',
          time: expect.any(String),
          region: 'local',
          resources: [],
          detail: { n: 7, nested: { ok: true } },
        },
      },
    ]);
  });

  test('a failing target is tried again twice (Lambda’s retries) and succeeds on the third attempt', async () => {
    const { eventIds } = await local.put([{ ...event(1), detailType: 'Flaky Thing' }]);
    await local.idle();
    expect(local.deliveries.find((d) => d.eventId === eventIds[0])).toMatchObject({
      rule: 'flaky',
      outcome: 'delivered',
      attempts: 3,
    });
  });

  test('a target that keeps failing: its event lands in the dead-letter file with the reason, logged', async () => {
    const { eventIds } = await local.put([{ ...event(1), detailType: 'Broken Thing' }]);
    await local.idle();
    expect(local.deliveries.find((d) => d.eventId === eventIds[0])).toMatchObject({
      outcome: 'failed',
      attempts: 3,
      error: 'Error: always broken',
    });
    const records = readFileSync(eventDlqPath(dir), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records.at(-1)).toMatchObject({
      requestContext: { requestId: eventIds[0], condition: 'RetriesExhausted', approximateInvokeCount: 3 },
      requestPayload: { id: eventIds[0], 'detail-type': 'Broken Thing', detail: { n: 1 } },
      responsePayload: { errorType: 'Error', errorMessage: 'always broken' },
    });
    expect(logs.some((l) => l.includes('event delivery failed') && l.includes(eventIds[0]!))).toBe(true);
  });

  test('a malformed event is not retried: straight to the dead-letter file', async () => {
    const { eventIds } = await local.put([{ ...event(1), detailType: 'Malformed Thing' }]);
    await local.idle();
    expect(local.deliveries.find((d) => d.eventId === eventIds[0])).toMatchObject({
      outcome: 'failed',
      attempts: 1,
      error: 'MalformedEvent: detail.n: expected number',
    });
  });

  test('an event no rule matches is accepted and dropped, as on EventBridge', async () => {
    const before = local.deliveries.length;
    const { eventIds } = await local.put([{ ...event(1), source: 'somewhere.else' }]);
    await local.idle();
    expect(eventIds).toHaveLength(1);
    expect(local.deliveries.length).toBe(before);
  });

  test('what PutEvents refuses is refused whole', async () => {
    await expect(local.put([event(1), { ...event(2), detail: [] as never }])).rejects.toThrow(
      'event 1 refused: detail must be an object',
    );
    await expect(local.put([{ ...event(1), source: '' }])).rejects.toThrow('source is required');
  });
});

describe('EventBridgeBus', () => {
  test('PutEvents on the named bus: source, detail type, the detail as JSON', async () => {
    aws.events.length = 0;
    const bus = new EventBridgeBus(fakeClient(), 'preview-bus');
    await bus.put([{ ...event(5), time: '2030-01-01T00:00:00Z' }]);
    expect(aws.events).toEqual([
      {
        EventBusName: 'preview-bus',
        Source: 'preview.test',
        DetailType: 'Thing Happened',
        Detail: JSON.stringify({ n: 5, nested: { ok: true } }),
        Time: Date.parse('2030-01-01T00:00:00Z') / 1000,
      },
    ]);
    expect(aws.calls).toContain('EventBridge.PutEvents');
  });

  describe('against answers EventBridge gives (at the SDK boundary)', () => {
    const client = new EventBridgeClient({ region: 'eu-west-1', credentials });
    const mock = mockClient(client);
    afterEach(() => {
      mock.reset();
    });
    const bus = () => new EventBridgeBus(client, 'b');
    const meta = (httpStatusCode: number) => ({ $metadata: { httpStatusCode } });

    test('batches of 10: one PutEvents per batch, the ids in order', async () => {
      let n = 0;
      mock.on(PutEventsCommand).callsFake((input: { Entries: unknown[] }) => ({
        FailedEntryCount: 0,
        Entries: input.Entries.map(() => ({ EventId: `e${++n}` })),
      }));
      const { eventIds } = await bus().put(Array.from({ length: 12 }, (_, i) => event(i)));
      expect(eventIds).toEqual(Array.from({ length: 12 }, (_, i) => `e${i + 1}`));
      const calls = mock.commandCalls(PutEventsCommand).map((c) => c.args[0].input.Entries!);
      expect(calls.map((entries) => entries.length)).toEqual([10, 2]);
      expect(calls[1]![1]).toEqual({
        EventBusName: 'b',
        Source: 'preview.test',
        DetailType: 'Thing Happened',
        Detail: JSON.stringify({ n: 11, nested: { ok: true } }),
      });
    });

    test('a partial failure is a TransientError naming the codes', async () => {
      mock.on(PutEventsCommand).resolves({
        FailedEntryCount: 1,
        Entries: [{ ErrorCode: 'ThrottlingException', ErrorMessage: 'slow down' }],
      });
      await expect(bus().put([event(1)])).rejects.toThrow(
        new TransientError('EventBridge refused 1 of 1 events (ThrottlingException)'),
      );
    });

    test('a 5xx or throttling (after the SDK’s retries) is transient; a missing bus or permission is not', async () => {
      const answer = async (err: Error) => {
        mock.reset();
        mock.on(PutEventsCommand).rejects(err);
        return bus()
          .put([event(1)])
          .catch((e: Error) => e);
      };
      expect(await answer(new InternalException({ message: 'oops', ...meta(500) }))).toBeInstanceOf(
        TransientError,
      );
      const throttled = Object.assign(new Error('Rate exceeded'), {
        name: 'ThrottlingException',
        ...meta(400),
      });
      expect(await answer(throttled)).toBeInstanceOf(TransientError);
      const err = await answer(
        new ResourceNotFoundException({ message: 'Event bus b does not exist.', ...meta(400) }),
      );
      expect(err).toBeInstanceOf(ServiceUnavailableError);
      expect(err).not.toBeInstanceOf(TransientError);
      expect((err as Error).message).toBe(
        'EventBridge PutEvents to b answered 400 ResourceNotFoundException',
      );
    });
  });
});
