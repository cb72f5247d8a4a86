import * as z from 'zod/mini';
import './zod-locale.js';

/**
 * Field rules shared by handlers and use cases. Names follow the source host's rules (GitHub) and the
 * cluster's (an app name becomes part of Kubernetes object names, so it is a DNS label).
 */
export const OWNER_RE = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
export const REPO_RE = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;
export const APP_NAME_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
export const ENV_VAR_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const ID_RE = /^[A-Za-z0-9_-]{1,128}$/;
export const MAX_PR = 2_147_483_647;

export const owner = z.string().check(z.regex(OWNER_RE, 'must be a GitHub owner name'));
export const repo = z.string().check(z.regex(REPO_RE, 'must be a GitHub repository name'));
export const repoFullName = z.string().check(
  z.refine((v) => {
    const [o, r, ...rest] = v.split('/');
    return rest.length === 0 && OWNER_RE.test(o ?? '') && REPO_RE.test(r ?? '');
  }, 'must be owner/repo with GitHub owner and repository names'),
);

/** `pr` in a path: a plain non-negative decimal integer (no sign, exponent, fraction or spaces). */
export const prPath = z
  .pipe(z.string().check(z.regex(/^[0-9]{1,10}$/, 'pr must be a non-negative integer')), z.transform(Number))
  .check(z.refine((n) => n <= MAX_PR, 'pr must be a non-negative integer'));

/*
 * Keys a caller chooses (secret keys, test variable names, runtime_metadata names, JSON member names,
 * query and header names) that are Object property names. The rule (hardening: user-chosen keys):
 * - `__proto__` is refused with a 400 wherever a caller names a key: a secret key (`envVarKey`, and again
 *   in core/secrets.ts), a JSON object member anywhere in a request body (api/middleware/json-body.ts, so
 *   also a runtime_metadata name) or in a tests file (core/tests.ts). Nothing is stored. It is the one name
 *   a plain object cannot hold as data: assigning it sets the prototype, so zod records skip it silently,
 *   the DynamoDB document client drops it on write and read, and a bundle could never round-trip it.
 * - Every other name, `constructor`, `toString`, `hasOwnProperty`, `valueOf` included, is an ordinary key:
 *   stored, listed, counted, overridden and deleted like any other. User-keyed maps are built as `Map`s or
 *   null-prototype objects, read with own-property checks only (`Object.hasOwn`, `Object.entries`), and
 *   written to DynamoDB as `Map`s (the document client refuses a plain object whose own `constructor`
 *   member is data). Query and header names are gathered in `Map`s (lib/local/http-bridge.ts) and
 *   null-prototype objects (api/middleware/request.ts and validate.ts): a query key `__proto__` matches no
 *   parameter, like any unknown one.
 */
/** The one key name refused wherever a caller chooses a key (see above). */
export const RESERVED_KEY = '__proto__';
export const isReservedKey = (key: string): boolean => key === RESERVED_KEY;
/** The zod `refine` arguments of the rule, for a string that becomes a key: `z.refine(...notReserved)`. */
const notReserved = [(key: string) => !isReservedKey(key), `must not be ${RESERVED_KEY}`] as const;

/**
 * Where the first own `__proto__` member of a parsed JSON value is (its path), or undefined. A JSON
 * document is checked with this before any schema: zod records skip such a member silently.
 */
export function reservedMemberPath(value: unknown): PropertyKey[] | undefined {
  return reservedMemberPaths(value, 1)[0];
}

/**
 * The paths of the own `__proto__` members of a parsed JSON value, at most `max` of them, in document
 * order (a file's validation reports them all at once, with the schema's issues). Iterative, so depth
 * costs no stack.
 */
export function reservedMemberPaths(value: unknown, max = Number.POSITIVE_INFINITY): PropertyKey[][] {
  interface Visit {
    value: object;
    key?: PropertyKey;
    parent?: Visit;
  }
  const pathOf = (v: Visit | undefined): PropertyKey[] => {
    const out: PropertyKey[] = [];
    for (let at = v; at?.parent; at = at.parent) out.unshift(at.key!);
    return out;
  };
  const found: PropertyKey[][] = [];
  const pending: Visit[] = [];
  if (typeof value === 'object' && value !== null) pending.push({ value });
  for (let next = pending.pop(); next !== undefined && found.length < max; next = pending.pop()) {
    const isArray = Array.isArray(next.value);
    if (!isArray && Object.hasOwn(next.value, RESERVED_KEY)) found.push([...pathOf(next), RESERVED_KEY]);
    // Pushed in reverse, so that popping visits the members in document order.
    const children: Visit[] = [];
    for (const [k, child] of Object.entries(next.value))
      if (typeof child === 'object' && child !== null)
        children.push({ value: child, key: isArray ? Number(k) : k, parent: next });
    pending.push(...children.reverse());
  }
  return found;
}

export const appName = z.string().check(z.regex(APP_NAME_RE, 'must be an app name (lower-case DNS label)'));
export const envVarKey = z
  .string()
  .check(
    z.maxLength(256),
    z.regex(ENV_VAR_RE, 'must be an environment variable name'),
    z.refine(...notReserved),
  );
export const rowId = z.string().check(z.regex(ID_RE, 'must be an id of letters, digits, - or _'));

/**
 * A `Host` header value: a DNS name or IPv4 address, or a bracketed IPv6 address, with an optional port.
 * Anything else (`a b`, `[::`, `x/y`, `u@h`) is refused with 400 before it reaches an address we build.
 */
export const HOST_RE =
  /^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252}[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$/;

// Query-string fields shared by the run and test routes.

/** A query boolean: only the strings `true` and `false`; absent is false. */
export const queryBoolean = z.pipe(
  z.optional(z.enum(['true', 'false'], { message: 'must be true or false' })),
  z.transform((v) => v === 'true'),
);

/** A query integer written in plain decimal digits, within [min, max]. */
export const queryInteger = (min: number, max?: number) => {
  const rule =
    max === undefined ? `must be an integer >= ${min}` : `must be an integer from ${min} to ${max}`;
  return z
    .pipe(z.string().check(z.regex(/^[0-9]{1,15}$/, rule)), z.transform(Number))
    .check(z.refine((n) => n >= min && (max === undefined || n <= max), rule));
};

// How every 400 names a field: one formatter for HTTP validation, tests files, recipes, preview.yaml and
// configuration errors.

/**
 * A field path as callers read it: `recipes[0].create.users[1].name`, `[0].steps[1].element` for a file
 * that is an array, `env["my key"]` for a key that is not an identifier.
 */
export function issuePath(parts: readonly PropertyKey[]): string {
  let out = '';
  for (const p of parts) {
    if (typeof p === 'number') out += `[${p}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(String(p))) out += out ? `.${String(p)}` : String(p);
    else out += `[${JSON.stringify(String(p))}]`;
  }
  return out;
}

/** `path: message` for each of the first `max` issues of a zod error (just the message at the root). */
export function issueMessages(error: z.core.$ZodError, max = 5): string[] {
  return error.issues.slice(0, max).map((i) => {
    const where = issuePath(i.path);
    // A record's key refused by its own schema: say why (`must be an environment variable name`).
    const message = (i.code === 'invalid_key' && i.issues[0]?.message) || i.message;
    return where ? `${where}: ${message}` : message;
  });
}

/**
 * Every problem of a file in one line, `a.b: message; c[0]: message`, within `maxChars` (each problem
 * within 300): the problems that do not fit are counted (`; … and 3 more`), never cut in half.
 */
export function listProblems(problems: readonly string[], maxChars = 900): string {
  const clip = (p: string) => (p.length > 300 ? `${p.slice(0, 299)}…` : p);
  let out = '';
  for (const [i, problem] of problems.entries()) {
    const next = out ? `${out}; ${clip(problem)}` : clip(problem);
    const left = problems.length - i - 1;
    // Room for the count of those left out, should a later one not fit.
    if (next.length + (left > 0 ? 20 : 0) > maxChars && out)
      return `${out}; … and ${problems.length - i} more`;
    out = next;
  }
  return out;
}

/** `invalid <where>: a.b: message; c[0]: message`, the text of a 400 for a zod error. */
export function describeIssues(where: string, error: z.core.$ZodError): string {
  return `invalid ${where}: ${issueMessages(error).join('; ')}`;
}
