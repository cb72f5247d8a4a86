import { isIP } from 'node:net';

/*
 * What a test run's browser may reach (docs/reference/tests-and-runs.md, "What a run may reach"):
 * `http:`/`https:` URLs whose origin is one of the run's environment's app URLs, or one of the origins its
 * application allows (`allowedOrigins`, `previewctl apps update --allow-origin`), and nothing else. The rule
 * is by exact origin (scheme, host and port): locally every app URL is on 127.0.0.1, so another port there
 * (the control plane, another organization's app) is another origin, refused.
 */

/** How many origins an application may allow. */
export const MAX_ALLOWED_ORIGINS = 20;

/** The origin (`scheme://host[:port]`, as the URL standard writes it) of an http(s) URL; else undefined. */
export function httpOrigin(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  return parsed.origin;
}

/** `scheme://host[:port]` of any URL, for a message (never its path or query); `about:` etc. as the scheme. */
export function originLabel(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.host) return `${parsed.protocol}//${parsed.host}`;
    // file:///x has no host; data:, javascript:, view-source:, chrome: name only their scheme.
    return parsed.protocol === 'file:' ? 'file://' : parsed.protocol.replace(/:$/, ':');
  } catch {
    return 'an invalid URL';
  }
}

const ipv4 = (host: string): number[] | undefined =>
  isIP(host) === 4 ? host.split('.').map(Number) : undefined;

/**
 * Whether a host name (as `URL.hostname` gives it: IPv6 in brackets) is loopback (`localhost`,
 * `*.localhost`, 127.0.0.0/8, ::1), link-local (169.254.0.0/16 — the Lambda and instance metadata
 * endpoints — and fe80::/10) or unspecified (0.0.0.0, ::), IPv4-mapped IPv6 forms included.
 */
export function isLocalHost(hostname: string): boolean {
  const host = hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const v4 = ipv4(host) ?? ipv4(host.replace(/^::ffff:/, ''));
  if (v4) return v4[0] === 127 || v4[0] === 0 || (v4[0] === 169 && v4[1] === 254);
  if (isIP(host) === 6) {
    // ::ffff:7f00:1 is the URL parser's form of ::ffff:127.0.0.1.
    const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
    if (mapped) {
      const hi = Number.parseInt(mapped[1]!, 16);
      const a = hi >> 8;
      const b = hi & 0xff;
      return a === 127 || a === 0 || (a === 169 && b === 254);
    }
    return host === '::1' || host === '::' || /^fe[89ab][0-9a-f]:/.test(host);
  }
  return false;
}

/** Hosts where the service itself answers in AWS (its API and report links): never an allowed origin. */
const SERVICE_HOST_RE = /\.(execute-api|lambda-url)\.[a-z0-9-]+\.(amazonaws\.com|amazonaws\.com\.cn)$/;

/**
 * One origin an application allows, as written by the operator (`https://login.example.com`): its
 * normalized origin, or an Error saying what is wrong. Only an `http:`/`https:` origin (no path, query,
 * fragment or credentials); never a loopback, link-local or unspecified host, nor the service's own
 * (API Gateway, Lambda URLs): those are reachable only as the preview's own app URLs.
 */
export function parseAllowedOrigin(text: string): string | Error {
  const raw = text.trim();
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return new Error(
      `"${raw}" is not a URL: an origin is scheme://host[:port], e.g. https://login.example.com`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return new Error(`"${raw}" is not an http: or https: origin`);
  if (url.username || url.password) return new Error(`"${raw}" must not carry credentials`);
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash || /[?#]$/.test(raw))
    return new Error(`"${raw}" is not an origin: give only scheme://host[:port], without a path or query`);
  if (isLocalHost(url.hostname))
    return new Error(
      `"${raw}" is a loopback or link-local address: a run reaches those only as its preview's own app URLs`,
    );
  if (SERVICE_HOST_RE.test(url.hostname.toLowerCase()))
    return new Error(`"${raw}" is where the service itself answers (API Gateway or a Lambda URL)`);
  return url.origin;
}

/**
 * The origins a run's browser may load: the environment's app URLs (as they are: loopback ones
 * included) and the application's allowed origins that are still valid (an origin stored before a rule
 * changed is dropped, not trusted). Sorted, without duplicates.
 */
export function runOrigins(appUrls: string[], allowed: readonly string[] = []): string[] {
  const out = new Set<string>();
  for (const u of appUrls) {
    const o = httpOrigin(u);
    if (o) out.add(o);
  }
  for (const a of allowed) {
    const o = parseAllowedOrigin(a);
    if (typeof o === 'string') out.add(o);
  }
  return [...out].sort();
}

/**
 * Whether the browser may load `url` under `origins` (from `runOrigins`): an http(s) URL of one of
 * them, a ws(s) URL of one of them (a WebSocket to the same host and port), or a blob: URL one of them
 * made. Everything else (`file:`, `chrome:`, `view-source:`, `data:`, `javascript:`, other hosts or
 * ports) is refused; `about:blank` is no load at all and callers let it through themselves.
 */
export function originAllowed(url: string, origins: ReadonlySet<string> | readonly string[]): boolean {
  const set = origins instanceof Set ? origins : new Set(origins as readonly string[]);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol === 'ws:' || parsed.protocol === 'wss:') {
    parsed = new URL(url.replace(/^ws/i, 'http'));
  }
  if (parsed.protocol === 'blob:') {
    const inner = httpOrigin(url.slice('blob:'.length));
    return inner !== undefined && set.has(inner);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return false;
  return set.has(parsed.origin);
}

/** Why a navigation is refused: the message of a refused step. */
export const navigationRefused = (url: string) =>
  `navigation to ${originLabel(url)} is not allowed for this run`;

/** Why a page's own request (a fetch, an image, a WebSocket, a popup's) is refused. */
export const requestRefused = (url: string, kind: string) =>
  `the page's ${kind} to ${originLabel(url)} is not allowed for this run`;

/** `host:port` of an origin, as Chromium's proxy bypass rules name it (the port always written). */
export function hostPort(origin: string): string {
  const u = new URL(origin);
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  return `${u.hostname}:${port}`;
}
