/**
 * The EventBus port: puts events on the service's own event bus, whose rules (functions/manifest/events.ts,
 * `bus: 'service'`) deliver them to their targets. Adapters: `eventbridge.ts` (an EventBridge custom bus,
 * PutEvents), `local-bus.ts` (in-process: the same rules, the same handler modules).
 */

/** One event as a producer puts it (EventBridge adds id, account, region and, unless given, time). */
export interface BusEvent {
  source: string;
  detailType: string;
  detail: Record<string, unknown>;
  /** When it happened (ISO 8601); default: when it was put. */
  time?: string;
}

/** An event as the bus delivers it to a target (the EventBridge event shape a Lambda receives). */
export interface DeliveredEvent {
  version: '0';
  id: string;
  'detail-type': string;
  source: string;
  account: string;
  time: string;
  region: string;
  resources: string[];
  detail: Record<string, unknown>;
}

export interface EventBus {
  /**
   * Put events on the bus; resolves once the bus has accepted every one of them (their delivery to the
   * rules' targets happens after, asynchronously). Throws when any was refused (nothing is retried here).
   */
  put(events: BusEvent[]): Promise<{ eventIds: string[] }>;
}
