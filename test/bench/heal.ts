/**
 * `npm run bench:heal`: steps that survive a changed page, measured on the corpus of heal-corpus.ts
 * (144 page changes of 12 kinds) replayed in Debian's chromium through the run's own Browser port and
 * step code (`performStep`), once with healing and once with the recorded selector alone (the
 * baseline, `heal: false`).
 *
 * Per case: a correct step acts on the element marked in the `after` page (a healed step: the element
 * it healed to; an unhealed one: the recorded selector's first match, checked in a plain page), or, when
 * no element should be acted on (removed, ambiguous), fails. A wrong action acts on another element.
 * Printed: correct heals of the healable cases, wrong actions, refusals of the cases that must fail, and
 * the time a heal adds to its step: the healed step's time minus the same step's on the `before` page,
 * where its recorded selector matches (median over the healed cases, same session, same run).
 * Targets: ≥ 95% of the healable cases healed correctly, 0 wrong actions, ≤ 300 ms added (median).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performStep } from '../../functions/core/runs/execution/steps.js';
import type { RunStepItem } from '../../functions/core/runs/store.js';
import { LocalChromium } from '../../functions/ports/browser/local-chromium.js';
import type { BrowserSession } from '../../functions/ports/browser/port.js';
import { setLogSink } from '../../functions/shared/log.js';
import { launchChromium } from '../support/chromium.js';
import { CHANGE_KINDS, type HealCase, healCorpus } from './heal-corpus.js';
import { median, reportFigure, runBench } from './report.js';

const STEP_MS = 2_000;
/** `BENCH_HEAL_EVERY=n` replays every n-th case only (a quick look). */
const every = Math.max(1, Number(process.env.BENCH_HEAL_EVERY ?? 1));
const cases = healCorpus().filter((_, i) => i % every === 0);
const pages = new Map<string, string>();
cases.forEach((c, i) => {
  pages.set(`/before/${i}`, c.before);
  pages.set(`/after/${i}`, c.after);
});
const server = createServer((req, res) => {
  const body = pages.get(req.url ?? '');
  res.writeHead(body ? 200 : 404, { 'content-type': 'text/html' });
  res.end(body ?? 'not found');
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
setLogSink(() => {});

const stepOf = (c: HealCase): RunStepItem => ({
  id: 's',
  instruction: c.instruction,
  interaction: c.interaction,
  url: '',
  element: { selector: c.selector, html: c.html },
  output: '',
  status: 'pending',
});

interface Outcome {
  passed: boolean;
  healed: boolean;
  /** The element acted on was the marked one (undefined: the step failed). */
  right?: boolean;
  ms: number;
  output: string;
}

async function replay(
  session: BrowserSession,
  c: HealCase,
  i: number,
  page: 'before' | 'after',
  heal: boolean,
  recordedHitsTarget: () => Promise<boolean>,
): Promise<Outcome> {
  await session.goto(`${base}/${page}/${i}`, 10_000);
  const target = { url: base, appUrl: base, origins: [base] };
  const t0 = performance.now();
  try {
    const r = await performStep(session, stepOf(c), { variables: {}, target, timeoutMs: STEP_MS, heal });
    const ms = performance.now() - t0;
    const right = r.healed ? (r.healed.html ?? '').includes('data-bench-target') : await recordedHitsTarget();
    return { passed: true, healed: !!r.healed, right, ms, output: r.output };
  } catch (err) {
    return { passed: false, healed: false, ms: performance.now() - t0, output: (err as Error).message };
  }
}

const local = new LocalChromium({ concurrency: 1 });
const plain = await launchChromium();

await runBench(
  async () => {
    const check = await plain.newPage();
    const session = await local.open({
      viewport: { width: 1280, height: 720 },
      video: false,
      allowedOrigins: [base],
    });
    const rows: { c: HealCase; healed: Outcome; alone: Outcome; control?: Outcome }[] = [];
    for (const [i, c] of cases.entries()) {
      /** Whether the recorded selector's first match in `after` is the marked element. */
      const hits = async () => {
        await check.setContent(c.after);
        return check
          .locator(c.selector)
          .first()
          .evaluate((e: unknown) =>
            (e as { hasAttribute(n: string): boolean }).hasAttribute('data-bench-target'),
          )
          .catch(() => false);
      };
      const healed = await replay(session, c, i, 'after', true, hits);
      const alone = await replay(session, c, i, 'after', false, hits);
      const control = healed.healed
        ? await replay(session, c, i, 'before', true, async () => true)
        : undefined;
      rows.push({ c, healed, alone, ...(control ? { control } : {}) });
      if ((i + 1) % 12 === 0) console.log(`  ${i + 1}/${cases.length} cases replayed`);
    }
    await session.close();

    const healable = rows.filter((r) => r.c.healable);
    const refusable = rows.filter((r) => !r.c.healable);
    const correct = (o: Outcome, c: HealCase) => (c.healable ? o.passed && o.right === true : !o.passed);
    const wrong = (o: Outcome) => o.passed && o.right === false;
    const added = rows.filter((r) => r.control?.passed).map((r) => r.healed.ms - (r.control as Outcome).ms);

    console.log(
      `bench:heal: ${cases.length} cases over ${CHANGE_KINDS.length} kinds, step timeout ${STEP_MS} ms\n`,
    );
    console.log(
      'kind                   cases  healed right  wrong  refused(ok)  | selector alone: right  wrong',
    );
    for (const kind of CHANGE_KINDS) {
      const k = rows.filter((r) => r.c.kind === kind);
      const h = k.filter((r) => r.c.healable && correct(r.healed, r.c)).length;
      const ref = k.filter((r) => !r.c.healable && !r.healed.passed).length;
      const aloneRight = k.filter((r) => correct(r.alone, r.c)).length;
      console.log(
        `${kind.padEnd(22)} ${String(k.length).padStart(5)}  ${String(h).padStart(12)}  ${String(k.filter((r) => wrong(r.healed)).length).padStart(5)}  ${String(ref).padStart(11)}  | ${String(aloneRight).padStart(21)}  ${String(k.filter((r) => wrong(r.alone)).length).padStart(5)}`,
      );
    }
    const healedRight = healable.filter((r) => correct(r.healed, r.c)).length;
    const wrongHeal = rows.filter((r) => wrong(r.healed)).length;
    const refused = refusable.filter((r) => !r.healed.passed).length;
    const aloneRight = healable.filter((r) => correct(r.alone, r.c)).length;
    const wrongAlone = rows.filter((r) => wrong(r.alone)).length;
    const share = healedRight / healable.length;
    const medianAdded = added.length ? median(added) : Number.NaN;
    console.log(
      `\nwith healing: ${healedRight}/${healable.length} healable cases right (${(share * 100).toFixed(1)}%), ` +
        `${wrongHeal} wrong actions, ${refused}/${refusable.length} removed or ambiguous cases refused`,
    );
    console.log(
      `recorded selector alone: ${aloneRight}/${healable.length} healable cases right (${((aloneRight / healable.length) * 100).toFixed(1)}%), ${wrongAlone} wrong actions, ` +
        `${refusable.filter((r) => !r.alone.passed).length}/${refusable.length} refused`,
    );
    console.log(
      `time a heal adds to its step: median ${medianAdded.toFixed(0)} ms over ${added.length} healed steps ` +
        `(min ${Math.min(...added).toFixed(0)}, max ${Math.max(...added).toFixed(0)})`,
    );
    for (const r of rows)
      if (!correct(r.healed, r.c)) console.log(`  missed ${r.c.name}: ${r.healed.output.slice(0, 200)}`);
    const figures = [
      {
        name: 'heal: healable cases healed correctly',
        measured: Math.round(share * 1000) / 10,
        target: '≥ 95%',
        ok: share >= 0.95,
        unit: '%',
        detail: `${healedRight}/${healable.length}; selector alone ${aloneRight}/${healable.length}`,
      },
      {
        name: 'heal: wrong actions',
        measured: wrongHeal,
        target: '= 0',
        ok: wrongHeal === 0,
        unit: '',
        detail: `selector alone ${wrongAlone}`,
      },
      {
        name: 'heal: removed or ambiguous refused',
        measured: refused,
        target: `= ${refusable.length}`,
        ok: refused === refusable.length,
        unit: '',
      },
      {
        name: 'heal: time added to a step (median)',
        measured: Math.round(medianAdded),
        target: '≤ 300 ms',
        ok: medianAdded <= 300,
        unit: 'ms',
      },
    ];
    for (const f of figures) reportFigure(f);
    return figures.every((f) => f.ok);
  },
  async () => {
    await plain.close().catch(() => undefined);
    await local.stop().catch(() => undefined);
    server.close();
  },
);
