/**
 * The Browser port: a headless browser a test run drives, one session (a fresh context of a warm browser)
 * per run, recording a video and a trace of it.
 * Adapters: `local-chromium.ts` (playwright-core driving Debian's chromium and ffmpeg from PATH, else the
 * packaged ones: local-tools.ts) and
 * `lambda-chromium.ts` (playwright-core driving @sparticuz/chromium in a Lambda, ffmpeg from a layer);
 * both run `playwright.ts`. Selectors are Playwright's: CSS, or `text=…`, `xpath=…`, `role=…`.
 */

export interface SessionOptions {
  viewport: { width: number; height: number };
  /** Record a video of the whole session (returned by `close`). */
  video: boolean;
  /**
   * Record a Playwright trace of the session (actions, DOM snapshots, screenshots, network; returned by
   * `close`, masked with the mask given there).
   */
  trace?: boolean;
  /**
   * The only origins (`scheme://host[:port]`) the session may load anything from (run confinement: the run's
   * app URLs and its application's allowed origins; `shared/origins.ts`). Every other navigation,
   * redirect hop, subresource, popup, worker request and WebSocket is refused by the browser itself, and
   * `file:`, `chrome:`, `view-source:`, `data:` documents with them; no downloads, no service workers.
   */
  allowedOrigins: string[];
}

/**
 * The longest an adapter's video encode may take (`close` kills the encoder then, returning no video): the
 * run executor keeps this much of its Lambda's time for it (core/run-deadline.ts).
 */
export const ENCODE_TIMEOUT_MS = 300_000;

/** A finished recording. */
export interface Video {
  body: Buffer;
  contentType: string;
  /** File extension for its key (`mp4`). */
  extension: string;
  durationMs: number;
}

/**
 * What the page reported during a step: console errors and warnings, uncaught page errors,
 * and requests that failed or were answered 4xx/5xx. Bounded: at most `MAX_STEP_EVENTS` per step (the
 * rest counted in `dropped`), each text at most `MAX_EVENT_TEXT` characters.
 */
export interface PageEvent {
  kind: 'console' | 'page-error' | 'request';
  /** console: `error` or `warning`; request: `failed` or the status (`500`). */
  level: string;
  text: string;
}
export interface PageEvents {
  events: PageEvent[];
  dropped: number;
}
export const MAX_STEP_EVENTS = 20;
export const MAX_HEALED_HTML = 20_000;
export const MAX_EVENT_TEXT = 500;

/** What a closed session recorded. */
export interface Recording {
  video?: Video;
  /** The Playwright trace (a zip the trace viewer opens), masked. */
  trace?: Buffer;
  /** Why a video or a trace was asked for and is not there (an encode or a trace that failed). */
  problems?: string[];
}

/**
 * One page in a fresh browser context (nothing of another run: cookies, storage, cache). Every action waits (up to `timeoutMs`) for its element to be there and
 * actionable, and rejects with the browser's own error (`net::ERR_CONNECTION_REFUSED …`, a timeout naming
 * the selector) otherwise.
 */
export interface BrowserSession {
  /** Open `url`; one outside `allowedOrigins` is refused before the browser sees it (rejects, saying so). */
  goto(url: string, timeoutMs: number): Promise<void>;
  click(selector: string, timeoutMs: number): Promise<void>;
  fill(selector: string, value: string, timeoutMs: number): Promise<void>;
  /** Press a key (`Enter`, `Control+A`): on the element when one is given, else on the page. */
  press(key: string, selector: string | undefined, timeoutMs: number): Promise<void>;
  /** Wait until an element matching `selector` is visible. */
  waitVisible(selector: string, timeoutMs: number): Promise<void>;
  /** Wait until the element's (or the page's) visible text contains `text`; whether it did in time. */
  waitForText(text: string, selector: string | undefined, timeoutMs: number): Promise<boolean>;
  /** A PNG of the viewport. */
  screenshot(timeoutMs: number): Promise<Buffer>;
  /** The page's current URL. */
  url(): string;
  /**
   * What the browser refused since the last call, then forgotten (see Refusals): the page's own
   * navigation refused, and every other request of the page refused.
   */
  takeRefusals(): Refusals;
  /**
   * Healing (core/runs/execution/heal.ts), optional: whether `selector` matches an element within
   * `timeoutMs` (attached; no visibility wait); the page's elements as feature records, and the recorded
   * element's (`html`, parsed in the page), in one round trip; then the first of `proposals` that
   * matches candidate `index` of that collection and nothing else, else a CSS path to it, with the
   * element's outer HTML (at most MAX_HEALED_HTML characters; undefined when the element is gone).
   */
  probe?(selector: string, timeoutMs: number): Promise<boolean>;
  healCandidates?(html: string): Promise<HealCandidates>;
  pinSelector?(index: number, proposals: string[]): Promise<{ selector: string; html: string } | undefined>;
  /** The cause, once the browser died under the session (a crash, a kill); undefined while it lives. */
  crashed(): string | undefined;
  /** Send these headers with every request of the session (scenario auth from the Environment Factory). */
  setExtraHTTPHeaders?(headers: Record<string, string>): Promise<void>;
  /** Add cookies to the session; one without a domain is set for `url`'s host. */
  addCookies?(cookies: SessionCookie[], url: string): Promise<void>;
  /**
   * Start the next step's group of actions in the trace (its title, `2. click #go`), ending the one
   * before; the trace viewer lists each step's actions under it.
   */
  beginStep?(title: string): Promise<void>;
  /** What the page reported since the last call (see PageEvent), then forgotten. */
  takeEvents?(): PageEvents;
  /**
   * Close the session (its context; the browser may stay warm for the next run); the video when one was
   * recorded (and any frame was painted), the trace when one was asked for, every text in it passed
   * through `mask`.
   */
  close(opts?: { mask?: (text: string) => string }): Promise<Recording>;
}

/**
 * What a step's healing compares of an element (core/runs/execution/heal.ts): collected in the page, in
 * one round trip, for the recorded element (`element.html`, parsed) and every element of the page.
 * Texts are whitespace-collapsed and cut at 200 characters.
 */
export interface ElementFeatures {
  tag: string;
  id?: string;
  name?: string;
  type?: string;
  classes: string[];
  placeholder?: string;
  ariaLabel?: string;
  /** The other `aria-*` attributes. */
  aria: Record<string, string>;
  /** Its explicit role, else the implicit one of its tag (`button`, `link`, `textbox`…). */
  role?: string;
  /** The text of its label (`<label for>`, a wrapping label, `aria-labelledby`). */
  label?: string;
  /** The value of its test id attribute, and which one (`data-testid`, `data-test`, `data-cy`, `data-qa`). */
  testId?: string;
  testIdAttr?: string;
  href?: string;
  text: string;
  alt?: string;
  title?: string;
  /** An input's current value, or a button input's label. */
  value?: string;
  visible: boolean;
  /** Takes typed text (a text-like input, a textarea, contenteditable). */
  editable: boolean;
  /** A button, a link, a form control, or an element with an interactive role. */
  interactive: boolean;
  /** The index of its nearest ancestor among the candidates; -1 at the top. */
  parent: number;
  depth: number;
}

/** A page's elements as healing sees them, and the recorded element (absent when it could not be parsed). */
export interface HealCandidates {
  recorded?: ElementFeatures;
  candidates: ElementFeatures[];
}

/**
 * A request of the page the browser refused (run confinement) that was not the page's own navigation:
 * its origin (`https://fonts.example.com`, `file://`), what it was, the message that says so
 * (`the page's image to https://fonts.example.com is not allowed for this run`) and how many times
 * (requests of the same kind to the same origin are one).
 */
export interface RefusedRequest {
  origin: string;
  /** `image`, `fetch`, `script`, `stylesheet`, `font`, `websocket`, `frame`, `popup`… */
  kind: string;
  message: string;
  count: number;
}

/**
 * What the browser refused (run confinement) since the last `takeRefusals`. `navigation`: the message of
 * a refused navigation of the session's page itself, its main frame (a link it followed, a redirect, a
 * script's `location` change: `navigation to http://host:port is not allowed for this run`), which fails
 * the step; `requests`: the page's other requests refused (a subresource, a fetch, a worker's, a
 * WebSocket, a frame, a popup): refused all the same, recorded, and the step goes on.
 */
export interface Refusals {
  navigation?: string;
  requests: RefusedRequest[];
  /** Refused requests past what a session keeps between two calls (200), not in `requests`. */
  dropped?: number;
}

/** A cookie to add to a session. */
export interface SessionCookie {
  name: string;
  value: string;
  domain?: string;
  path?: string;
}

export interface Browser {
  /**
   * What this host lacks to run test runs (the browser, ffmpeg), as one line telling the operator what
   * to install; undefined when nothing is missing.
   */
  missing(): string | undefined;
  open(opts: SessionOptions): Promise<BrowserSession>;
  /**
   * Wait for this host's turn to run (the local server runs up to `PREVIEW_RUN_CONCURRENCY` at once, the
   * rest in the order they asked); `release` when the run ended. Absent: no queue (a Lambda runs one).
   */
  turn?(): Promise<{ release(): void }>;
}
