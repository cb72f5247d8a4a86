import { describe, expect, test } from '@jest/globals';
import { call, client } from '../../support/api.js';
import { localServerForFile } from '../../support/local-server.js';
import { recordedStep, runEnded, signUpBeforeRename } from '../../support/runs-app.js';
import { runsAppForFile, startRun } from '../../support/runs-suite.js';

/*
 * Steps that survive a changed page, end to end in the real browser: the fixture app's sign-up page
 * (`#email`, `#submit`, then `#greeting`) against steps recorded on an older version of it (other ids).
 * A healed step passes saying so (`healed: <from> → <to> (<score>)`, its `healed` object), the run
 * counts them (`healed_steps`) and `GET /run?healed=true` lists it; `"heal": false` fails as before;
 * an element gone fails naming the closest candidates; a healed assert-text still needs its text; a
 * secret variable is masked in what a heal records.
 */

const h = localServerForFile();
const app = runsAppForFile(h);
const SECRET_EMAIL = 'heal-secret-7f3a@example.com';

/** The sign-up test as recorded before the page renamed its ids. */
const oldSteps = [
  ...signUpBeforeRename,
  recordedStep(
    'assert-text',
    'The page says "Thanks for signing up"',
    '#thanks',
    '<h1 id="thanks">Thanks for signing up</h1>',
  ),
  recordedStep('assert-text', 'The page says "Welcome, {{variable:EMAIL}}"', '#greeting', ''),
  recordedStep('assert-visible', 'See the Back link', 'a#back', '<a id="back" href="/">Back</a>'),
];

const runOf = async (over: Record<string, unknown>) => {
  const testId = await app.importTest({
    variables: { EMAIL: SECRET_EMAIL },
    secret_variables: ['EMAIL'],
    ...over,
  });
  const { run_id } = await startRun(h, testId);
  return runEnded(h, run_id, 120_000);
};

describe('a run whose recorded selectors match nothing', () => {
  let healed: any;
  let optedOut: any;

  test('heals each step to the element its recording describes, and says so', async () => {
    healed = await runOf({ steps: oldSteps });
    expect([healed.status, healed.error]).toEqual(['passed', undefined]);
    const steps = healed.steps;
    expect(steps.map((s: any) => s.status)).toEqual([
      'passed',
      'passed',
      'passed',
      'passed',
      'passed',
      'passed',
    ]);
    for (const [i, from] of [
      [1, '#user-email'],
      [2, '#signup-button'],
      [3, '#thanks'],
      [5, 'a#back'],
    ] as const) {
      expect(steps[i].output).toMatch(
        new RegExp(`^healed: ${from.replace(/[#]/g, '\\$&')} → .+ \\(0\\.\\d\\d\\); `),
      );
      expect(steps[i].healed).toMatchObject({ from, score: expect.any(Number) });
      expect(steps[i].healed.score).toBeGreaterThanOrEqual(0.6);
    }
    // The new selectors, in Playwright's order of preference: role and name first where there is one.
    expect(steps[1].healed.to).toBe('role=textbox[name="Email"]');
    expect(steps[2].healed.to).toBe('role=button[name="Sign up"]');
    expect(steps[5].healed.to).toBe('role=link[name="Back"]');
    expect(steps[3].healed.html).toBe('<h1>Thanks for signing up</h1>');
    // A step whose selector matches is not healed.
    expect([steps[4].healed, steps[4].output]).toEqual([
      undefined,
      expect.stringMatching(/^found "Welcome, /),
    ]);
    expect(healed.healed_steps).toBe(4);
    expect(JSON.stringify(healed)).not.toContain(SECRET_EMAIL);
    // The report marks each healed step and the run's count.
    const report = await (await fetch(healed.report_url)).text();
    expect(report.match(/<span class="healed" title=/g)).toHaveLength(4);
    expect(report).toContain('<span class="healed" id="healed-steps">4 steps healed</span>');
    expect(report).toContain('healed: #signup-button → role=button[name=&quot;Sign up&quot;]');
    expect(report).not.toContain(SECRET_EMAIL);
  }, 180_000);

  test('`"heal": false`: the same steps fail as before healing existed', async () => {
    optedOut = await runOf({ steps: oldSteps, heal: false });
    expect(optedOut.status).toBe('failed');
    expect(optedOut.steps[1].status).toBe('failed');
    expect(optedOut.steps[1].healed).toBeUndefined();
    expect(optedOut.steps[1].output).not.toMatch(/^healed/);
    expect(optedOut.healed_steps).toBeUndefined();
  }, 180_000);

  test('an element gone fails its step naming the closest candidates; a healed assert-text needs its text', async () => {
    // After signing up: the page shows the secret email, which a refusal's candidates never leak.
    const gone = await runOf({
      steps: [
        ...oldSteps.slice(0, 3),
        recordedStep(
          'click',
          'Click "Delete account"',
          '#delete',
          '<p id="delete" class="danger">Delete account</p>',
        ),
      ],
    });
    expect(gone.status).toBe('failed');
    expect(JSON.stringify(gone)).not.toContain('heal-secret');
    expect(gone.steps[3].output).toMatch(
      /^#delete matched nothing; (closest: .+ 0\.\d\d.*: none close enough|no element of the page is like it)$/,
    );
    const wrongText = await runOf({
      steps: [
        oldSteps[0],
        recordedStep('assert-text', 'The heading says "Goodbye"', '#title', '<h1 id="title">Sign up</h1>'),
      ],
    });
    expect(wrongText.status).toBe('failed');
    expect(wrongText.steps[1].output).toMatch(/^text "Goodbye" not found in role=heading\[name="Sign up"\]/);
  }, 240_000);

  test('kinds of change on the catalog page: classes renamed in new wrappers, an input re-attributed, a link turned button (its id kept); wait-for and press healed', async () => {
    const run = await runOf({
      variables: { Q: 'shoes', EMAIL: SECRET_EMAIL },
      steps: [
        { interaction: 'navigate', instruction: 'Open the catalog', url: '/kinds' },
        recordedStep(
          'click',
          'Click Save draft',
          '.btn-save',
          '<button type="button" class="btn-save primary">Save draft</button>',
        ),
        recordedStep(
          'wait-for',
          'Wait for the saved notice',
          '#toast',
          '<div id="toast" class="toast" role="status">Draft saved</div>',
        ),
        recordedStep(
          'input-text',
          'Type {{variable:Q}} into the search box',
          '#search',
          '<input type="search" placeholder="Search products" name="q" id="search">',
        ),
        recordedStep(
          'press',
          'Press Enter',
          '#search',
          '<input type="search" placeholder="Search products" name="q" id="search">',
        ),
        recordedStep('assert-text', 'The page says "Results for shoes"', '#results', '<p id="results"></p>'),
        recordedStep(
          'click',
          'Click Show more',
          'a#show-more',
          '<a id="show-more" href="#more">Show more</a>',
        ),
        recordedStep('assert-text', 'The list says "More items"', '#more-list', '<ul id="more-list"></ul>'),
      ],
    });
    expect([run.status, run.error]).toEqual(['passed', undefined]);
    const healedAt = run.steps.flatMap((s: any, i: number) =>
      s.healed ? [[i, s.interaction, s.healed.from]] : [],
    );
    expect(healedAt).toEqual([
      [1, 'click', '.btn-save'],
      [2, 'wait-for', '#toast'],
      [3, 'input-text', '#search'],
      [4, 'press', '#search'],
      [6, 'click', 'a#show-more'],
    ]);
    expect(run.healed_steps).toBe(5);
    for (const [i] of healedAt) {
      const s = run.steps[i];
      expect(
        s.output.startsWith(`healed: ${s.healed.from} → ${s.healed.to} (${s.healed.score.toFixed(2)})`),
      ).toBe(true);
      expect(s.healed.score).toBeGreaterThanOrEqual(0.6);
    }
    // Where each acted, in Playwright's order of preference; the later asserts (not healed) show it.
    expect(run.steps[1].healed.to).toBe('role=button[name="Save draft"]');
    // A role without a name is no unique locator here: its text is the next in that order.
    expect(run.steps[2].healed.to).toBe('text="Draft saved"');
    expect(run.steps[2].output).toMatch(/ appeared$/);
    expect(run.steps[4].output).toMatch(/pressed Enter on /);
    expect(run.steps[6].healed.to).toBe('role=button[name="Show more"]');
    expect(run.steps[5]).toMatchObject({ status: 'passed', output: 'found "Results for shoes" in #results' });
    expect(run.steps[7]).toMatchObject({ status: 'passed', output: 'found "More items" in #more-list' });
  }, 180_000);

  test('the other kinds of change: a sibling inserted before, a look-alike decoy inserted before, text reworded, the element moved; each click healed', async () => {
    // As test/bench/heal-corpus.ts makes them: a hint before the button (its `:first-child` selector
    // fails), a Log in button before Sign up (its id renamed), Pricing reworded (its id renamed), the
    // close button moved out of its slot into a toolbar (its id kept).
    const said = (n: string) =>
      recordedStep('assert-text', `The page says "Clicked ${n}"`, '#said', '<p id="said"></p>');
    const run = await runOf({
      steps: [
        { interaction: 'navigate', instruction: 'Open the shop', url: '/moved' },
        recordedStep(
          'click',
          'Click "Add to cart"',
          '#cart-slot > button:first-child',
          '<button id="add" data-testid="add-to-cart" class="btn" type="button">Add to cart</button>',
        ),
        said('Add to cart'),
        recordedStep(
          'click',
          'Click "Sign up"',
          '#signup',
          '<button id="signup" type="button" class="btn btn-primary">Sign up</button>',
        ),
        said('Sign up'),
        recordedStep(
          'click',
          'Click Pricing',
          '#pricing',
          '<a id="pricing" class="nav-link" href="#pricing">Pricing</a>',
        ),
        said('Pricing plans'),
        recordedStep(
          'click',
          'Click the close button',
          '#dialog-slot > #close',
          '<button id="close" class="icon-btn" aria-label="Close dialog" type="button">×</button>',
        ),
        said('Close dialog'),
      ],
    });
    expect([run.status, run.error]).toEqual(['passed', undefined]);
    const healedAt = run.steps.flatMap((s: any, i: number) =>
      s.healed ? [[i, s.interaction, s.healed.from]] : [],
    );
    expect(healedAt).toEqual([
      [1, 'click', '#cart-slot > button:first-child'],
      [3, 'click', '#signup'],
      [5, 'click', '#pricing'],
      [7, 'click', '#dialog-slot > #close'],
    ]);
    expect(run.healed_steps).toBe(4);
    for (const [i] of healedAt) {
      const s = run.steps[i];
      expect(
        s.output.startsWith(`healed: ${s.healed.from} → ${s.healed.to} (${s.healed.score.toFixed(2)})`),
      ).toBe(true);
      expect(s.healed.score).toBeGreaterThanOrEqual(0.6);
    }
    // Where each acted, in Playwright's order of preference: its test id first where it has one.
    expect(run.steps.flatMap((s: any) => (s.healed ? [s.healed.to] : []))).toEqual([
      '[data-testid="add-to-cart"]',
      'role=button[name="Sign up"]',
      'role=link[name="Pricing plans"]',
      'role=button[name="Close dialog"]',
    ]);
    // Each click hit its element, not the one inserted before it: the asserts after them (not healed) say so.
    for (const [i, n] of [
      [2, 'Add to cart'],
      [4, 'Sign up'],
      [6, 'Pricing plans'],
      [8, 'Close dialog'],
    ] as const)
      expect(run.steps[i]).toMatchObject({ status: 'passed', output: `found "Clicked ${n}" in #said` });
    for (const i of [2, 4, 6, 8]) expect(run.steps[i].healed).toBeUndefined();
  }, 180_000);

  test('two look-alikes are never guessed between: the step fails saying so', async () => {
    const run = await runOf({
      steps: [
        { interaction: 'navigate', instruction: 'Open the catalog', url: '/kinds' },
        recordedStep(
          'click',
          'Click Delete',
          '#delete',
          '<button type="button" id="delete" class="danger">Delete</button>',
        ),
      ],
    });
    expect(run.status).toBe('failed');
    expect(run.steps[1].healed).toBeUndefined();
    expect(run.steps[1].output).toMatch(
      /^#delete matched nothing; closest: .+ 0\.\d\d, .+ 0\.\d\d.*: too close to tell apart$/,
    );
  }, 180_000);

  test('GET /run?healed=true lists the runs with a healed step, and only them', async () => {
    const res = await call(h, 'GET', '/run?healed=true&limit=100', { headers: client(h.org) });
    expect(res.status).toBe(200);
    const ids = res.body.map((r: any) => r.id);
    expect(ids).toContain(healed.id);
    expect(ids).not.toContain(optedOut.id);
    expect(res.body.find((r: any) => r.id === healed.id).healed_steps).toBe(4);
    for (const bad of ['maybe', '1', ''])
      expect((await call(h, 'GET', `/run?healed=${bad}`, { headers: client(h.org) })).body).toEqual({
        error: expect.stringMatching(/healed: must be true or false/),
      });
    // Another organization sees none of them.
    const other = await h.newOrg('healing-other');
    const theirs = await call(h, 'GET', '/run?healed=true', { headers: client(other) });
    expect([theirs.status, theirs.body]).toEqual([200, []]);
  }, 60_000);
});
