import httpJsonBodyParser from '@middy/http-json-body-parser';
import type { APIGatewayProxyEvent } from 'aws-lambda';
import { DEFAULT_MAX_BODY_BYTES } from '../../manifest/routes.js';
import { PayloadTooLargeError, ValidationError } from '../../shared/errors.js';
import { RESERVED_KEY, reservedMemberPath } from '../../shared/validation.js';
import type { Middleware } from './request.js';

/** Deepest nesting of arrays and objects a JSON body may have (400 beyond it, before it is parsed). */
export const MAX_JSON_DEPTH = 64;

export interface JsonBodyOptions {
  /** Largest body in bytes, as received (the route's `maxBodyBytes`). @default DEFAULT_MAX_BODY_BYTES */
  maxBodyBytes?: number;
  /** Whether the route takes a body (it has a body schema); without one the body is only capped. */
  takesBody: boolean;
  /** A missing or empty body is a 400 (otherwise the body is `undefined`). @default false */
  required?: boolean;
}

/**
 * Reads the body: 413 above the route's cap (measured on the body as received), then, when the route
 * takes a body, 400 for text that is not UTF-8, nests deeper than {@link MAX_JSON_DEPTH}, is not JSON (any
 * content type: this API speaks only JSON), or has a `__proto__` member anywhere (a prototype-pollution
 * payload). Leaves the parsed body and its text on `internal.body` and `internal.rawBody`.
 */
export const jsonBody = ({
  maxBodyBytes: max = DEFAULT_MAX_BODY_BYTES,
  takesBody,
  required = false,
}: JsonBodyOptions): Middleware => {
  // The parse itself is @middy/http-json-body-parser's (`disableContentTypeCheck`: a runtime option its
  // type declarations do not list), on a copy of the event holding the decoded text.
  const parser = httpJsonBodyParser({ disableContentTypeCheck: true } as Parameters<
    typeof httpJsonBodyParser
  >[0]);
  const capped = (event: APIGatewayProxyEvent) => {
    const read = bodyOf(event);
    if (read.bytes > max)
      throw new PayloadTooLargeError(`request body is too large: at most ${max} bytes${kb(max)}`);
    return read;
  };
  // A route without a body schema only caps the body: synchronously (no promise per request).
  if (!takesBody)
    return {
      before: (request) => {
        capped(request.event);
      },
    };
  return {
    before: async (request) => {
      const internal = request.internal;
      const { bytes, text } = capped(request.event);
      if (bytes > 0 && text === undefined) throw new ValidationError('request body is not valid UTF-8');
      internal.rawBody = text;
      if (text === undefined || text.trim() === '') {
        if (required) throw new ValidationError('request body is required');
        internal.body = undefined;
        return;
      }
      if (jsonDepthExceeds(text, MAX_JSON_DEPTH))
        throw new ValidationError(
          `request body is nested too deeply: at most ${MAX_JSON_DEPTH} levels of arrays and objects`,
        );
      const copy = { ...request.event, body: text, isBase64Encoded: false };
      try {
        await parser.before?.({ ...request, event: copy } as never);
      } catch {
        throw new ValidationError('request body is not valid JSON');
      }
      const parsed: unknown = copy.body;
      if (reservedMemberPath(parsed))
        throw new ValidationError(`request body must not contain ${RESERVED_KEY} members`);
      internal.body = parsed;
    },
  };
};

/**
 * Whether JSON text nests arrays and objects deeper than `max`: a linear scan of the text (strings
 * skipped), so a body 100,000 levels deep costs no stack and is refused before it is parsed.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      // A backslash escapes the next character; a quote ends the string.
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The size in bytes of the body as received, and its text (undefined when it is not valid UTF-8). */
function bodyOf(event: APIGatewayProxyEvent): { bytes: number; text: string | undefined } {
  const body = event.body;
  if (body === null || body === undefined) return { bytes: 0, text: undefined };
  if (!event.isBase64Encoded) return { bytes: Buffer.byteLength(body, 'utf8'), text: body };
  const raw = Buffer.from(body, 'base64');
  try {
    return { bytes: raw.length, text: utf8.decode(raw) };
  } catch {
    return { bytes: raw.length, text: undefined };
  }
}

const kb = (bytes: number) => (bytes % 1024 === 0 ? ` (${bytes / 1024} KB)` : '');
