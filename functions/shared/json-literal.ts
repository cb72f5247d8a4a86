import { ValidationError } from './errors.js';

/*
 * JSON.parse forgets how a number was written (`1`, `1.0` and `1e0` all become 1), and Node 20 has no
 * JSON.parse source access. Some contract rules are about the literal ("version must be the JSON integer
 * 1"), so this reads the raw text of a top-level member. Input is already known to be valid JSON.
 */

const WS = new Set([' ', '\t', '\n', '\r']);

function skipWs(s: string, i: number): number {
  while (i < s.length && WS.has(s[i]!)) i++;
  return i;
}

function skipString(s: string, i: number): number {
  for (i++; i < s.length; i++) {
    if (s[i] === '\\') i++;
    else if (s[i] === '"') return i + 1;
  }
  return i;
}

function skipValue(s: string, i: number): number {
  const c = s[i];
  if (c === '"') return skipString(s, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    for (; i < s.length; i++) {
      const ch = s[i];
      if (ch === '"') i = skipString(s, i) - 1;
      else if (ch === '{' || ch === '[') depth++;
      else if (ch === '}' || ch === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    return i;
  }
  while (i < s.length && !WS.has(s[i]!) && s[i] !== ',' && s[i] !== '}' && s[i] !== ']') i++;
  return i;
}

/**
 * Raw source text of the value of top-level member `key` of a JSON object document (the last one, as
 * JSON.parse keeps the last of duplicate keys), or undefined when absent or the document is not an object.
 */
export function topLevelLiteral(raw: string, key: string): string | undefined {
  let i = skipWs(raw, 0);
  if (raw[i] !== '{') return undefined;
  i++;
  let found: string | undefined;
  for (;;) {
    i = skipWs(raw, i);
    if (raw[i] !== '"') return found;
    const keyEnd = skipString(raw, i);
    const name = JSON.parse(raw.slice(i, keyEnd)) as string;
    i = skipWs(raw, keyEnd) + 1; // past ':'
    i = skipWs(raw, i);
    const valueEnd = skipValue(raw, i);
    if (name === key) found = raw.slice(i, valueEnd);
    i = skipWs(raw, valueEnd);
    if (raw[i] !== ',') return found;
    i++;
  }
}

/** Reject a top-level number member written with a fraction or exponent (`1.0`, `1e0`). */
export function jsonInteger(raw: string | undefined, key: string): void {
  const literal = raw === undefined ? undefined : topLevelLiteral(raw, key);
  if (literal !== undefined && /^-?\d/.test(literal) && !/^-?(0|[1-9]\d*)$/.test(literal)) {
    throw new ValidationError(`${key} must be a JSON integer (written without a fraction or exponent)`);
  }
}
