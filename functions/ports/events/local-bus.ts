import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type EventRuleDef, eventRules } from '../../manifest/events.js';
import { lambdaContext } from '../../shared/aws/lambda-context.js';
import { log } from '../../shared/log.js';
import type { BusEvent, DeliveredEvent, EventBus } from './port.js';

/*
 * The local event bus: the rules of the event manifest that sit on the service's own bus, run in-process.
 * `put` accepts the events and returns; each matching rule's target (the same handler module CDK deploys)
 * gets the event afterwards, asynchronously, as EventBridge invokes a Lambda. A failed invocation is
 * tried again twice (Lambda's retries of an asynchronous invocation; a MalformedEvent is not retried
 * here, since no retry can help it), then written to `<dataDir>/event-dlq.jsonl` in the shape of a
 * Lambda on-failure destination record, with the reason logged. A failing handler never takes the
 * process down.
 */

type Target = (event: DeliveredEvent, context: unknown) => Promise<unknown>;
type Rule = Pick<EventRuleDef, 'pattern'> & { target: { entry: string } };

export interface LocalBusOptions {
  repoRoot: string;
  /** Where the dead-letter file goes. */
  dataDir: string;
  /** Waits before each retry of a failed delivery (default 200 and 400 ms: two retries). */
  retryDelaysMs?: number[];
  /** The rules to deliver (default: every `bus: 'service'` rule of the event manifest). */
  rules?: Record<string, Rule>;
}

/** One delivery of one event to one rule's target, as it ended. */
export interface DeliveryRecord {
  eventId: string;
  rule: string;
  detailType: string;
  outcome: 'delivered' | 'failed';
  attempts: number;
  /** `<error name>: <message>` of the last attempt, when it failed. */
  error?: string;
  result?: unknown;
}

/** The file failed deliveries are appended to. */
export const eventDlqPath = (dataDir: string): string => join(dataDir, 'event-dlq.jsonl');

/** The service-bus rules of the event manifest. */
export function serviceBusRules(): Record<string, Rule> {
  return Object.fromEntries(
    Object.entries(eventRules as Record<string, EventRuleDef>).filter(([, r]) => r.bus === 'service'),
  );
}

/*
 * The matcher implements the part of EventBridge's pattern language the manifest's rules use: a field's
 * pattern is a list of exact values (strings, numbers, booleans, null; any of them matches, and a list in
 * the event matches when one of its values is in the pattern's), a field absent from the event matches
 * nothing, and objects nest. Every other form (the operators `prefix`, `suffix`, `anything-but`,
 * `numeric`, `exists`, `wildcard`, `equals-ignore-case`, `cidr`, and `$or`) is refused when the bus is
 * built, which is when the server starts: a rule using one would work in AWS and silently never match
 * here. A full EventBridge matcher is not needed (the rules are the service's own); the refusal is.
 */

/** A form of a rule's pattern that this bus does not match: where, and what. */
export interface UnsupportedPatternForm {
  /** The field's path in the pattern (`detail.ref`). */
  path: string;
  /** What it uses: `the "prefix" operator`, `a nested list`, … */
  form: string;
}

const isExactValue = (v: unknown) =>
  v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/** The first form of `pattern` this bus does not implement, or undefined when it can match it all. */
export function unsupportedPatternForm(pattern: unknown, path = ''): UnsupportedPatternForm | undefined {
  const where = path || 'the pattern';
  if (Array.isArray(pattern)) {
    if (pattern.length === 0) return { path: where, form: 'an empty list' };
    for (const value of pattern) {
      if (isExactValue(value)) continue;
      if (Array.isArray(value)) return { path: where, form: 'a nested list' };
      const operator = Object.keys(value as object)[0];
      return { path: where, form: operator ? `the "${operator}" operator` : 'an empty object' };
    }
    return undefined;
  }
  if (pattern && typeof pattern === 'object') {
    const fields = Object.entries(pattern);
    if (fields.length === 0) return { path: where, form: 'an empty object' };
    for (const [key, value] of fields) {
      if (key === '$or') return { path: where, form: 'the "$or" operator' };
      const bad = unsupportedPatternForm(value, path ? `${path}.${key}` : key);
      if (bad) return bad;
    }
    return undefined;
  }
  return { path: where, form: `a bare ${pattern === undefined ? 'undefined' : typeof pattern} (not a list)` };
}

/** Refuse rules whose patterns this bus cannot match, naming the rule, the field and the operator. */
export function assertPatternsSupported(rules: Record<string, Pick<Rule, 'pattern'>>): void {
  for (const [ruleId, rule] of Object.entries(rules)) {
    const bad = unsupportedPatternForm(rule.pattern);
    if (bad)
      throw new Error(
        `event rule ${ruleId}: ${bad.path} uses ${bad.form}, which the local event bus does not implement ` +
          '(it matches lists of exact values and nested objects): the rule would match in AWS and never ' +
          'locally. Write the pattern with exact values, or implement the form in functions/ports/events/local-bus.ts',
      );
  }
}

function matchesValue(pattern: unknown, value: unknown): boolean {
  if (Array.isArray(pattern)) {
    if (value === undefined) return false;
    const values = Array.isArray(value) ? value : [value];
    return values.some((v) => pattern.some((p) => p === v));
  }
  if (pattern && typeof pattern === 'object') {
    if (!value || typeof value !== 'object' || Array.isArray(value)) return false;
    return Object.entries(pattern).every(([k, p]) =>
      matchesValue(p, Object.hasOwn(value, k) ? (value as Record<string, unknown>)[k] : undefined),
    );
  }
  return false;
}

/**
 * Whether an event matches a rule's pattern (exact values and nested objects, above), over every field
 * of the event: `source`, `detail-type`, `detail`, and `account`, `region` or `resources` as well.
 */
export function matchesPattern(pattern: object, event: DeliveredEvent): boolean {
  return matchesValue(pattern, event);
}

/** What EventBridge refuses at PutEvents (an entry without source, detail type or an object detail). */
function refusal(e: BusEvent): string | undefined {
  if (typeof e?.source !== 'string' || !e.source) return 'source is required';
  if (typeof e.detailType !== 'string' || !e.detailType) return 'detail type is required';
  if (!e.detail || typeof e.detail !== 'object' || Array.isArray(e.detail)) return 'detail must be an object';
  if (e.time !== undefined && Number.isNaN(Date.parse(e.time))) return 'time must be an ISO 8601 time';
  return undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class LocalBus implements EventBus {
  /** Every delivery that ended, oldest first (the last 1000). */
  readonly deliveries: DeliveryRecord[] = [];
  private readonly rules: Record<string, Rule>;
  private readonly targets = new Map<string, Promise<Target>>();
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly opts: LocalBusOptions) {
    this.rules = opts.rules ?? serviceBusRules();
    assertPatternsSupported(this.rules);
  }

  async put(events: BusEvent[]): Promise<{ eventIds: string[] }> {
    const problems = events.map(refusal);
    const bad = problems.findIndex((p) => p !== undefined);
    if (bad >= 0) throw new Error(`event ${bad} refused: ${problems[bad]}`);
    const eventIds: string[] = [];
    for (const e of events) {
      const event: DeliveredEvent = {
        version: '0',
        id: randomUUID(),
        'detail-type': e.detailType,
        source: e.source,
        account: '000000000000',
        time: e.time ? new Date(e.time).toISOString() : new Date().toISOString(),
        region: 'local',
        resources: [],
        detail: structuredClone(e.detail),
      };
      eventIds.push(event.id);
      const matched = Object.entries(this.rules).filter(([, rule]) => matchesPattern(rule.pattern, event));
      if (matched.length === 0)
        log.info('event matched no rule', {
          eventId: event.id,
          source: event.source,
          detailType: e.detailType,
        });
      for (const [ruleId, rule] of matched) this.track(this.deliver(ruleId, rule, event));
    }
    return { eventIds };
  }

  /** Resolves once no delivery is in flight (deliveries started meanwhile are awaited too). */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.allSettled([...this.inFlight]);
  }

  /** Stop delivering (events put afterwards are accepted and dropped) and wait for what is in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.idle();
  }

  private track(p: Promise<void>): void {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  private target(entry: string): Promise<Target> {
    let t = this.targets.get(entry);
    if (!t) {
      const url = pathToFileURL(join(this.opts.repoRoot, entry)).href;
      t = (import(url) as Promise<{ handler: Target }>).then((m) => m.handler);
      this.targets.set(entry, t);
      t.catch(() => this.targets.delete(entry));
    }
    return t;
  }

  private async deliver(ruleId: string, rule: Rule, event: DeliveredEvent): Promise<void> {
    // After `put` has returned, like an asynchronous invocation.
    await new Promise((r) => setImmediate(r));
    const delays = this.opts.retryDelaysMs ?? [200, 400];
    let attempts = 0;
    let last: Error | undefined;
    while (!this.stopped) {
      attempts++;
      try {
        const handler = await this.target(rule.target.entry);
        const result = await handler(structuredClone(event), lambdaContext(ruleId, event.id, 60_000));
        this.record({
          eventId: event.id,
          rule: ruleId,
          detailType: event['detail-type'],
          outcome: 'delivered',
          attempts,
          result,
        });
        return;
      } catch (err) {
        last = err instanceof Error ? err : new Error(String(err));
        if (last.name === 'MalformedEvent' || attempts > delays.length) break;
        await sleep(delays[attempts - 1]!);
      }
    }
    if (!last) return; // stopped before the first attempt
    const error = `${last.name}: ${last.message}`;
    this.record({
      eventId: event.id,
      rule: ruleId,
      detailType: event['detail-type'],
      outcome: 'failed',
      attempts,
      error,
    });
    log.error('event delivery failed; sent to the dead-letter file', {
      rule: ruleId,
      eventId: event.id,
      detailType: event['detail-type'],
      attempts,
      error: last.name,
      reason: last.message.slice(0, 500),
    });
    const record = {
      version: '1.0',
      timestamp: new Date().toISOString(),
      requestContext: {
        requestId: event.id,
        functionArn: `arn:aws:lambda:local:000000000000:function:${ruleId}`,
        condition: 'RetriesExhausted',
        approximateInvokeCount: attempts,
      },
      requestPayload: event,
      responseContext: { statusCode: 200, functionError: 'Unhandled' },
      responsePayload: { errorType: last.name, errorMessage: last.message },
    };
    try {
      appendFileSync(eventDlqPath(this.opts.dataDir), `${JSON.stringify(record)}\n`, { mode: 0o600 });
    } catch (err) {
      log.error('could not write the event dead-letter file', { name: (err as Error).name });
    }
  }

  private record(r: DeliveryRecord): void {
    this.deliveries.push(r);
    if (this.deliveries.length > 1000) this.deliveries.shift();
  }
}
