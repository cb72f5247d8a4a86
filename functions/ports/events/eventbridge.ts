import { SignatureV4 } from '@smithy/signature-v4';
import { ServiceUnavailableError } from '../../shared/errors.js';
import { TransientError } from '../../shared/step-errors.js';
import { type CredentialProvider, NodeSha256 } from '../runtime/eks-auth.js';
import type { BusEvent, EventBus } from './port.js';

/*
 * The EventBus port on an EventBridge custom bus (AWS mode): `PutEvents` over the JSON 1.1 protocol,
 * signed with SigV4 (@smithy/signature-v4, the SDK's own signer) and sent with fetch. The
 * @aws-sdk/client-eventbridge package is not a dependency of this project; PutEvents is one call with a
 * flat JSON body, so the client would add a package for one request.
 *
 * The endpoint is `https://events.<region>.amazonaws.com` unless `AWS_ENDPOINT_URL_EVENTBRIDGE` (or
 * `AWS_ENDPOINT_URL`) says otherwise, as for the SDK clients. Entries go in batches of 10 (PutEvents'
 * limit). A partial failure (`FailedEntryCount` > 0) or a 5xx / throttling answer is a TransientError
 * naming the error codes; anything else is a ServiceUnavailableError (permissions, a missing bus).
 */

export interface EventBridgeBusOptions {
  /** The bus's name or ARN (EVENT_BUS_NAME). */
  busName: string;
  region: string;
  credentials: CredentialProvider;
  /** Base URL of the EventBridge API. Default: the regional endpoint. */
  endpoint?: string;
  fetch?: typeof fetch;
  /** Per-request timeout (default 10 s). */
  timeoutMs?: number;
}

const MAX_ENTRIES = 10;

interface PutEventsResult {
  FailedEntryCount?: number;
  Entries?: { EventId?: string; ErrorCode?: string; ErrorMessage?: string }[];
}

export class EventBridgeBus implements EventBus {
  private readonly endpoint: URL;
  private readonly signer: SignatureV4;

  constructor(private readonly opts: EventBridgeBusOptions) {
    const suffix = opts.region.startsWith('cn-') ? 'amazonaws.com.cn' : 'amazonaws.com';
    this.endpoint = new URL(opts.endpoint ?? `https://events.${opts.region}.${suffix}`);
    this.signer = new SignatureV4({
      credentials: opts.credentials,
      region: opts.region,
      service: 'events',
      sha256: NodeSha256,
    });
  }

  async put(events: BusEvent[]): Promise<{ eventIds: string[] }> {
    const eventIds: string[] = [];
    for (let i = 0; i < events.length; i += MAX_ENTRIES) {
      eventIds.push(...(await this.putBatch(events.slice(i, i + MAX_ENTRIES))));
    }
    return { eventIds };
  }

  private async putBatch(events: BusEvent[]): Promise<string[]> {
    const body = JSON.stringify({
      Entries: events.map((e) => ({
        EventBusName: this.opts.busName,
        Source: e.source,
        DetailType: e.detailType,
        Detail: JSON.stringify(e.detail),
        ...(e.time ? { Time: Math.floor(Date.parse(e.time) / 1000) } : {}),
      })),
    });
    const path = this.endpoint.pathname.replace(/\/*$/, '/');
    const signed = await this.signer.sign({
      method: 'POST',
      protocol: this.endpoint.protocol,
      hostname: this.endpoint.hostname,
      port: this.endpoint.port ? Number(this.endpoint.port) : undefined,
      path,
      query: {},
      headers: {
        host: this.endpoint.host,
        'content-type': 'application/x-amz-json-1.1',
        'x-amz-target': 'AWSEvents.PutEvents',
      },
      body,
    });
    const url = `${this.endpoint.protocol}//${this.endpoint.host}${path}`;
    let res: Response;
    try {
      res = await (this.opts.fetch ?? fetch)(url, {
        method: 'POST',
        // fetch sets Host itself (to the same value the signature covers).
        headers: Object.fromEntries(
          Object.entries(signed.headers as Record<string, string>).filter(([k]) => k !== 'host'),
        ),
        body,
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
      });
    } catch (err) {
      throw new TransientError(`EventBridge PutEvents failed (${(err as Error).name})`, { cause: err });
    }
    const text = await res.text();
    let json: (PutEventsResult & { __type?: string; message?: string; Message?: string }) | undefined;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const type = (json?.__type ?? res.headers.get('x-amzn-errortype') ?? 'error').split('#').pop();
      const message = `EventBridge PutEvents to ${this.opts.busName} answered ${res.status} ${type}`;
      if (res.status >= 500 || /Throttl/i.test(type ?? '')) throw new TransientError(message);
      throw new ServiceUnavailableError(message);
    }
    const entries = json?.Entries ?? [];
    if ((json?.FailedEntryCount ?? 0) > 0 || entries.length !== events.length) {
      const codes = [...new Set(entries.map((e) => e.ErrorCode).filter(Boolean))];
      throw new TransientError(
        `EventBridge refused ${json?.FailedEntryCount ?? events.length} of ${events.length} events` +
          (codes.length ? ` (${codes.join(', ')})` : ''),
      );
    }
    return entries.map((e) => e.EventId ?? '');
  }
}
