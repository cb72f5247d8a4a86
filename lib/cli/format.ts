/* How previewctl prints for people: aligned tables and `key: value` lines. */

export interface Column<T> {
  header: string;
  value: (row: T) => string | number | undefined | null;
  /** Right-aligned (numbers). */
  right?: boolean;
  /** Longer values are cut to this many characters, ending in `…`. */
  max?: number;
}

/** Rows as an aligned table with a header line; `empty` when there are none. */
export function table<T>(rows: T[], columns: Column<T>[], empty: string): string {
  if (rows.length === 0) return empty;
  const cells = rows.map((r) =>
    columns.map((c) => {
      const v = c.value(r);
      const text = v === undefined || v === null || v === '' ? '-' : String(v).replace(/\s+/g, ' ');
      return c.max !== undefined && text.length > c.max ? `${text.slice(0, c.max - 1)}…` : text;
    }),
  );
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((row) => row[i]!.length)));
  const line = (values: string[]) =>
    values
      .map((v, i) =>
        i === values.length - 1 && !columns[i]!.right
          ? v
          : columns[i]!.right
            ? v.padStart(widths[i]!)
            : v.padEnd(widths[i]!),
      )
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join('\n');
}

/** `key: value` lines; objects and arrays as compact JSON, absent values left out. */
export function fields(record: Record<string, unknown>): string {
  return Object.entries(record)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join('\n');
}

/** A time as `YYYY-MM-DD HH:MM:SS` (UTC), or undefined. */
export const when = (iso: unknown): string | undefined =>
  typeof iso === 'string' && iso.length >= 19 ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}` : undefined;

/** A commit's short form. */
export const short = (sha: unknown): string | undefined =>
  typeof sha === 'string' ? sha.slice(0, 12) : undefined;

/** Compare numbers as numbers, then text: for sorting. */
export function byNumberThenText(a: number | string, b: number | string): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b));
}
