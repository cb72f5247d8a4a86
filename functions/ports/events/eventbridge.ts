import {
  type EventBridgeClient,
  PutEventsCommand,
  type PutEventsCommandOutput,
} from '@aws-sdk/client-eventbridge';
import { asTransient, awsStatus } from '../../shared/aws/aws-errors.js';
import { ServiceUnavailableError } from '../../shared/errors.js';
import { TransientError } from '../../shared/step-errors.js';
import type { BusEvent, EventBus } from './port.js';

/*
 * The EventBus port on an EventBridge custom bus (AWS mode): `PutEvents` through
 * `@aws-sdk/client-eventbridge` (the container's client, registry/aws-clients.ts: the SDK's retry mode,
 * endpoint rules and `AWS_ENDPOINT_URL_EVENTBRIDGE`). Entries go in batches of 10 (PutEvents' limit). A
 * partial failure (`FailedEntryCount` > 0) is a TransientError naming the entries' error codes, as is a
 * call that failed for a reason worth another try (throttling, a server or network error, after the SDK's
 * own attempts: shared/aws/aws-errors.ts); anything else is a ServiceUnavailableError (permissions, a
 * missing bus).
 */

const MAX_ENTRIES = 10;

export class EventBridgeBus implements EventBus {
  constructor(
    private readonly client: EventBridgeClient,
    /** The bus's name or ARN (EVENT_BUS_NAME). */
    private readonly busName: string,
  ) {}

  async put(events: BusEvent[]): Promise<{ eventIds: string[] }> {
    const eventIds: string[] = [];
    for (let i = 0; i < events.length; i += MAX_ENTRIES) {
      eventIds.push(...(await this.putBatch(events.slice(i, i + MAX_ENTRIES))));
    }
    return { eventIds };
  }

  private async putBatch(events: BusEvent[]): Promise<string[]> {
    const command = new PutEventsCommand({
      Entries: events.map((e) => ({
        EventBusName: this.busName,
        Source: e.source,
        DetailType: e.detailType,
        Detail: JSON.stringify(e.detail),
        ...(e.time ? { Time: new Date(e.time) } : {}),
      })),
    });
    let out: PutEventsCommandOutput;
    try {
      out = await this.client.send(command);
    } catch (err) {
      const what = `EventBridge PutEvents to ${this.busName}`;
      const transient = asTransient(err, what);
      if (transient instanceof TransientError) throw transient;
      const status = awsStatus(err);
      throw new ServiceUnavailableError(
        `${what} ${status ? `answered ${status}` : 'failed:'} ${(err as Error)?.name ?? 'Error'}`,
        { cause: err },
      );
    }
    const entries = out.Entries ?? [];
    if ((out.FailedEntryCount ?? 0) > 0 || entries.length !== events.length) {
      const codes = [...new Set(entries.map((e) => e.ErrorCode).filter(Boolean))];
      throw new TransientError(
        `EventBridge refused ${out.FailedEntryCount ?? events.length} of ${events.length} events` +
          (codes.length ? ` (${codes.join(', ')})` : ''),
      );
    }
    return entries.map((e) => e.EventId ?? '');
  }
}
