import type { BrowserContext, Page, Browser as PwBrowser } from 'playwright-core';
import { hostPort, originAllowed } from '../../shared/origins.js';

/**
 * Where every connection the browser makes to a host:port outside the allowed origins is sent: a proxy
 * that is not there (port 1 on loopback: nothing unprivileged can listen on it), so it fails with
 * `ERR_PROXY_CONNECTION_FAILED`, and there is no fallback to a direct connection.
 */
export const NO_PROXY = 'http://127.0.0.1:1';

/**
 * The session's confinement (a run reaches only its preview), enforced by the browser in two layers:
 * - the connection layer: Chromium's proxy settings send every connection to the dead `NO_PROXY`
 *   except those to an allowed origin's host:port (`<-loopback>` makes loopback go through the proxy
 *   too, where Chromium would otherwise always connect directly): whatever makes it (a page, a redirect
 *   hop, a worker, a WebSocket), a connection elsewhere never opens;
 * - the request layer: the browser-wide Fetch domain (CDP, on the browser target, so every page, popup,
 *   frame and worker of the browser, redirect hops included) fails each request whose URL is not of an
 *   allowed origin, `file:` and `view-source:` included, and each redirect (at the response stage) whose
 *   Location is not one, whatever its scheme, and remembers each refusal with its URL, what it was
 *   (CDP's resource type) and its frame (CDP's `frameId`), so the session tells the page's own
 *   navigation (its main frame: the step fails) from the page's other requests (recorded, the step goes
 *   on); `data:` is let through as a subresource (inline images) and refused as a document.
 * WebSockets are not requests the Fetch domain sees: the connection layer refuses them, and the page's
 * `websocket` event names them.
 */
export class OriginGuard {
  private allowed: ReadonlySet<string> = new Set();
  private refusals: GuardRefusal[] = [];
  /** Refusals past MAX_KEPT since the last `take` (a page that retries a blocked request in a loop). */
  private dropped = 0;

  /** The origins allowed now: those of the run that holds the browser (none between runs). */
  get origins(): ReadonlySet<string> {
    return this.allowed;
  }

  /**
   * Confine the browser to `origins` from now on (a warm browser passes from run to run: one run at a
   * time, see warm-browser.ts), forgetting any refusal of the run before.
   */
  use(origins: string[]): void {
    this.allowed = new Set(origins);
    this.refusals = [];
    this.dropped = 0;
  }

  /** Chromium's proxy bypass list: every allowed host:port, and loopback proxied like the rest. */
  bypass(): string {
    return ['<-loopback>', ...[...this.origins].map(hostPort)].join(',');
  }

  refuse(refusal: GuardRefusal): void {
    // A document is always kept: the page's own navigation refused fails its step.
    if (refusal.document || this.refusals.length < MAX_KEPT) this.refusals.push(refusal);
    else this.dropped++;
  }

  /** Every refusal since the last call (at most MAX_KEPT, the rest counted), then forgotten. */
  take(): { refusals: GuardRefusal[]; dropped: number } {
    const taken = { refusals: this.refusals, dropped: this.dropped };
    this.refusals = [];
    this.dropped = 0;
    return taken;
  }

  async attach(browser: PwBrowser): Promise<void> {
    const cdp = await browser.newBrowserCDPSession();
    cdp.on('Fetch.requestPaused', (event) => {
      const type = event.resourceType;
      let url = event.request.url;
      let allowed = url.startsWith('data:') ? type !== 'Document' : originAllowed(url, this.origins);
      // At the response stage: a redirect is judged by where it points, before the browser follows it
      // (Chromium would refuse a redirect to file:, data: or chrome: itself, but without saying so).
      const status = event.responseStatusCode;
      if (allowed && status !== undefined && status >= 300 && status < 400) {
        const location = event.responseHeaders?.find((h) => h.name.toLowerCase() === 'location')?.value;
        if (location) {
          url = resolveLocation(location, url);
          allowed = originAllowed(url, this.origins);
        }
      }
      if (allowed) {
        cdp.send('Fetch.continueRequest', { requestId: event.requestId }).catch(() => undefined);
        return;
      }
      this.refuse({
        url,
        kind: requestKind(type),
        document: type === 'Document',
        ...(event.frameId ? { frameId: event.frameId } : {}),
      });
      cdp
        .send('Fetch.failRequest', { requestId: event.requestId, errorReason: 'BlockedByClient' })
        .catch(() => undefined);
    });
    await cdp.send('Fetch.enable', {
      patterns: [
        { urlPattern: '*', requestStage: 'Request' },
        { urlPattern: '*', requestStage: 'Response' },
      ],
    });
  }

  /** Name a WebSocket a page of the context opens outside the origins (the proxy refuses its connection). */
  watch(context: BrowserContext): void {
    const onPage = (page: Page) =>
      page.on('websocket', (ws) => {
        if (!originAllowed(ws.url(), this.origins))
          this.refuse({ url: ws.url(), kind: 'websocket', document: false });
      });
    context.on('page', onPage);
    for (const page of context.pages()) onPage(page);
  }
}

/**
 * A request the guard refused: its URL, what it was (`image`, `fetch`, `script`, `document`…), whether
 * it was a document (a page's, a frame's or a popup's navigation), and the frame it was for (CDP's
 * `frameId`; a WebSocket has none).
 */
export interface GuardRefusal {
  url: string;
  kind: string;
  document: boolean;
  frameId?: string;
}

/** The refusals kept between two `take`s: enough to name every origin a step's page asked for. */
const MAX_KEPT = 200;

/** A Location header against the URL that answered it (an unparsable one stays as it is: refused). */
function resolveLocation(location: string, base: string): string {
  try {
    return new URL(location, base).href;
  } catch {
    return location;
  }
}

/** What a request is, in a message: CDP's resource type (`XHR`, `Fetch` → fetch; `Image` → image). */
const requestKind = (type: string) => (type === 'XHR' || type === 'Fetch' ? 'fetch' : type.toLowerCase());
