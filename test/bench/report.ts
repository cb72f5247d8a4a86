/**
 * The one way a benchmark reports a figure against its target, so `npm run bench` (test/bench/all.ts) can
 * collect every figure from the scripts it runs and print them side by side.
 *
 * A script prints its own human-readable lines as it likes, and one `BENCH-RESULT {json}` line per
 * target through `reportFigure`. Figures are ratios against a baseline measured in the same run wherever
 * the target is a ratio (this machine is shared and noisy); absolute figures say so in `unit`.
 */
// Every benchmark runs with each organization's fair share raised above what it sends (the limiter still
// counts every request, so its cost is in the figures; it just never refuses): test/support/env.ts.
import '../support/env.js';

export interface Figure {
  /** Short stable name, e.g. `status poll / bare GetItem server`. */
  name: string;
  /** What was measured, e.g. 0.83 (a ratio) or 212 (KB). */
  measured: number;
  /** The target, as text: `≥ 0.8×`, `≤ 250 KB`. */
  target: string;
  /** Whether the measured figure meets the target. */
  ok: boolean;
  /** Unit of `measured`: `×`, `KB`, `ms`, `/s`, `s`. */
  unit: string;
  /** Optional detail: the raw figures behind a ratio (`612 vs 731 req/s`). */
  detail?: string;
  /** A figure printed for context, not one of the targets: shown as INFO, never counted. */
  informational?: true;
}

export const RESULT_PREFIX = 'BENCH-RESULT ';

export function reportFigure(figure: Figure): void {
  console.log(`${RESULT_PREFIX}${JSON.stringify(figure)}`);
}

/** Parse the `BENCH-RESULT` lines out of a script's output. */
export function parseFigures(output: string): Figure[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith(RESULT_PREFIX))
    .map((line) => JSON.parse(line.slice(RESULT_PREFIX.length)) as Figure);
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Run a benchmark's `main` (true when every target was met), print what made it fail, always `cleanup`,
 * then exit 0 when it passed and 1 otherwise.
 */
export async function runBench(main: () => Promise<boolean>, cleanup: () => unknown): Promise<never> {
  let ok = false;
  try {
    ok = await main();
  } catch (err) {
    console.error(`bench failed: ${(err as Error).stack ?? err}`);
  } finally {
    await cleanup();
  }
  process.exit(ok ? 0 : 1);
}
