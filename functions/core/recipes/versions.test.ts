import { createHash } from 'node:crypto';
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { ValidationError } from '../../shared/errors.js';
import { testRunShortId, validateRecipesFile } from './versions.js';

type Json = any;

/** A valid file exercising nested refs, tokens inside longer strings and extra keys. */
const validFile = (): Json => ({
  version: 1,
  source: {
    discoverPath: '~/.svc/projects/shop/discover.json',
    scenariosPath: '~/.svc/projects/shop/scenarios.md',
    generator: 'planner 2.1',
  },
  validationMode: 'sdk-check',
  recipes: [
    {
      name: 'user-with-order',
      description: 'a user who placed one order',
      create: {
        users: [
          {
            _alias: 'buyer',
            email: 'qa+{{testRunShortId}}@example.com',
            username: 'u-{{testRunId}}-{{testRunShortId}}',
          },
        ],
        orders: [
          {
            _alias: 'order1',
            userId: { _ref: 'buyer' },
            lines: [{ sku: 'A-1', reservedFor: { _ref: 'buyer' } }],
            meta: { placedBy: { _ref: 'buyer' }, note: 'not {a token} nor {{unclosed' },
          },
        ],
        invoices: [{ orderId: { _ref: 'order1' }, total: 12.5, paid: false, voidedAt: null }],
      },
      validation: { status: 'validated', method: 'checkScenario', phase: 'ok', up_ms: 120, down_ms: 0 },
      reviewer: 'kept as an extra key',
    },
  ],
});

/** A valid file changed by `edit`. */
const withChange = (edit: (f: Json) => void): Json => {
  const f = validFile();
  edit(f);
  return f;
};

/** The message of the ValidationError the validator throws (fails the test when it does not throw). */
function rejection(doc: unknown, rawBody?: string): string {
  let thrown: unknown;
  try {
    validateRecipesFile(doc, rawBody);
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(ValidationError);
  return (thrown as Error).message;
}

describe('validateRecipesFile accepts', () => {
  test('a valid file: nested _ref in objects and arrays, tokens inside longer strings, extra keys', () => {
    // Act / Assess
    expect(validateRecipesFile(validFile())).toEqual({ recipeCount: 1 });
  });

  test('version written as the integer 1 in the raw body', () => {
    const raw = JSON.stringify(validFile(), null, 2);
    expect(raw).toContain('"version": 1,');
    expect(validateRecipesFile(JSON.parse(raw), raw)).toEqual({ recipeCount: 1 });
  });

  test('deprecated variables, endpoint-lifecycle, forward refs, empty models and several recipes', () => {
    const f = withChange((f) => {
      f.validationMode = 'endpoint-lifecycle';
      f.recipes[0].variables = { userEmail: { type: 'string', value: '{{anything}} is not checked here' } };
      f.recipes.push({
        name: 'empty-shop',
        description: 'no orders yet',
        create: { orders: [], shops: [{ ownerId: { _ref: 'owner' } }], owners: [{ _alias: 'owner' }] },
        validation: { status: 'validated', method: 'endpoint-up-down', phase: 'ok' },
      });
    });
    expect(validateRecipesFile(f)).toEqual({ recipeCount: 2 });
  });

  test('the same alias in two different recipes', () => {
    const f = withChange((f) => f.recipes.push(structuredClone(f.recipes[0])));
    expect(validateRecipesFile(f)).toEqual({ recipeCount: 2 });
  });
});

describe('validateRecipesFile rejects, naming the culprit', () => {
  test.each([
    ['an array', []],
    ['null', null],
    ['a string', 'recipes'],
  ])('a body that is %s', (_label, doc) => {
    expect(rejection(doc)).toBe('recipes file must be a JSON object');
  });

  test.each([
    ['the string "1"', '1', 'version: must be the integer 1'],
    ['2', 2, 'version: must be the integer 1'],
    ['absent', undefined, 'version: required'],
  ])('version %s', (_label, version, message) => {
    expect(rejection(withChange((f) => (f.version = version)))).toBe(message);
  });

  test.each(['1.0', '1e0', '1E0', '10e-1'])('version written as %s in the raw body', (literal) => {
    const raw = JSON.stringify(validFile()).replace('"version":1,', `"version":${literal},`);
    expect(raw).toContain(`"version":${literal},`);
    expect(rejection(JSON.parse(raw), raw)).toBe(
      'version must be a JSON integer (written without a fraction or exponent)',
    );
  });

  test.each([
    ['source absent', (f: Json) => delete f.source, 'source: required'],
    ['source a string', (f: Json) => (f.source = 'x'), 'source: must be an object'],
    ['discoverPath absent', (f: Json) => delete f.source.discoverPath, 'source.discoverPath: required'],
    ['scenariosPath absent', (f: Json) => delete f.source.scenariosPath, 'source.scenariosPath: required'],
    [
      'scenariosPath a number',
      (f: Json) => (f.source.scenariosPath = 3),
      'source.scenariosPath: must be a string',
    ],
    [
      'validationMode unknown',
      (f: Json) => (f.validationMode = 'http'),
      'validationMode: must be sdk-check or endpoint-lifecycle',
    ],
    ['validationMode absent', (f: Json) => delete f.validationMode, 'validationMode: required'],
    ['recipes empty', (f: Json) => (f.recipes = []), 'recipes: must have at least 1 recipe'],
    ['recipes absent', (f: Json) => delete f.recipes, 'recipes: required'],
    ['recipes an object', (f: Json) => (f.recipes = {}), 'recipes: must be an array of recipes'],
    ['a recipe not an object', (f: Json) => (f.recipes = ['r']), 'recipes[0]: must be an object'],
    ['recipe name absent', (f: Json) => delete f.recipes[0].name, 'recipes[0].name: required'],
    [
      'recipe description absent',
      (f: Json) => delete f.recipes[0].description,
      'recipes[0].description: required',
    ],
    ['create absent', (f: Json) => delete f.recipes[0].create, 'recipes[0].create: required'],
    [
      'create an array',
      (f: Json) => (f.recipes[0].create = []),
      'recipes[0].create: must be an object: model name -> array of rows',
    ],
    [
      'variables not an object',
      (f: Json) => (f.recipes[0].variables = 'v'),
      'recipes[0].variables: must be an object',
    ],
    ['validation absent', (f: Json) => delete f.recipes[0].validation, 'recipes[0].validation: required'],
    [
      'validation.status not validated',
      (f: Json) => (f.recipes[0].validation.status = 'pending'),
      'recipes[0].validation.status: must be "validated"',
    ],
    [
      'validation.status absent',
      (f: Json) => delete f.recipes[0].validation.status,
      'recipes[0].validation.status: required',
    ],
    [
      'validation.phase not ok',
      (f: Json) => (f.recipes[0].validation.phase = 'down'),
      'recipes[0].validation.phase: must be "ok"',
    ],
    [
      'validation.method unknown',
      (f: Json) => (f.recipes[0].validation.method = 'manual'),
      'recipes[0].validation.method: must be checkScenario, checkAllScenarios or endpoint-up-down',
    ],
    [
      'validation.up_ms negative',
      (f: Json) => (f.recipes[0].validation.up_ms = -1),
      'recipes[0].validation.up_ms: must be an integer >= 0',
    ],
    [
      'validation.down_ms fractional',
      (f: Json) => (f.recipes[0].validation.down_ms = 1.5),
      'recipes[0].validation.down_ms: must be an integer >= 0',
    ],
    [
      'validation.up_ms a string',
      (f: Json) => (f.recipes[0].validation.up_ms = '5'),
      'recipes[0].validation.up_ms: must be an integer >= 0',
    ],
  ])('%s', (_label, edit, message) => {
    expect(rejection(withChange(edit))).toBe(message);
  });

  test.each([
    ['a string', 'alice'],
    ['a number', 3],
    ['null', null],
    ['an object', { _alias: 'u' }],
  ])('a model whose value is %s', (_label, value) => {
    const f = withChange((f) => (f.recipes[0].create.tags = value));
    expect(rejection(f)).toBe('recipes[0].create.tags: must be an array of row objects');
  });

  test.each([
    ['a string', 'alice'],
    ['a number', 1],
    ['null', null],
    ['an array', [{ name: 'a' }]],
  ])('a model array holding %s', (_label, value) => {
    const f = withChange((f) => f.recipes[0].create.users.push(value));
    expect(rejection(f)).toBe('recipes[0].create.users[1]: must be a row object');
  });

  test('an unknown token, named with its path', () => {
    const f = withChange((f) => f.recipes[0].create.users.push({ name: 'Ann {{userId}}' }));
    expect(rejection(f)).toBe(
      'unknown token {{userId}} in recipes[0].create.users[1].name: tokens that resolve to nothing',
    );
  });

  test.each([
    ['inner spaces', '{{ testRunId }}'],
    ['other case', '{{TestRunId}}'],
    ['empty', '{{}}'],
    ['a variable-style token', '{{variable:EMAIL}}'],
  ])('a misspelt built-in token (%s)', (_label, token) => {
    const f = withChange((f) => (f.recipes[0].create.users[0].email = `qa+${token}@example.com`));
    expect(rejection(f)).toBe(
      `unknown token ${token} in recipes[0].create.users[0].email: tokens that resolve to nothing`,
    );
  });

  test('an unknown token deep inside arrays and objects of a row value', () => {
    const f = withChange(
      (f) => (f.recipes[0].create.orders[0].lines[0].tags = ['a', { label: 'x{{sku}}y' }]),
    );
    expect(rejection(f)).toBe(
      'unknown token {{sku}} in recipes[0].create.orders[0].lines[0].tags[1].label: tokens that resolve to nothing',
    );
  });

  test('an unknown token in a key (keys are checked like values)', () => {
    const f = withChange((f) => (f.recipes[0].create.users[0]['col_{{n}}'] = 'v'));
    expect(rejection(f)).toBe(
      'unknown token {{n}} in the key recipes[0].create.users[0]["col_{{n}}"]: tokens that resolve to nothing',
    );
  });

  test('a _ref with no matching _alias, named', () => {
    const f = withChange((f) => (f.recipes[0].create.orders[0].accountId = { _ref: 'acct' }));
    expect(rejection(f)).toBe('_ref "acct" in recipes[0].create.orders[0].accountId matches no _alias');
  });

  test('a dangling _ref nested inside an array inside an object', () => {
    const f = withChange(
      (f) => (f.recipes[0].create.orders[0].meta.approvers = [{ _ref: 'buyer' }, { _ref: 'boss' }]),
    );
    expect(rejection(f)).toBe(
      '_ref "boss" in recipes[0].create.orders[0].meta.approvers[1] matches no _alias',
    );
  });

  test('a _ref to an alias declared only in another recipe', () => {
    const f = withChange((f) =>
      f.recipes.push({
        name: 'second',
        description: 'refers across recipes',
        create: { carts: [{ userId: { _ref: 'buyer' } }] },
        validation: { status: 'validated', method: 'checkAllScenarios', phase: 'ok' },
      }),
    );
    expect(rejection(f)).toBe('_ref "buyer" in recipes[1].create.carts[0].userId matches no _alias');
  });

  test('a duplicate _alias within one recipe', () => {
    const f = withChange((f) => f.recipes[0].create.users.push({ _alias: 'buyer' }));
    expect(rejection(f)).toBe(
      'duplicate _alias "buyer" in recipes[0].create.users[1]: already declared by recipes[0].create.users[0]',
    );
  });

  test.each([
    ['empty', ''],
    ['a number', 7],
    ['null', null],
  ])('an _alias that is %s', (_label, alias) => {
    const f = withChange((f) => (f.recipes[0].create.users[0]._alias = alias));
    // The refs to "buyer" now dangle too: both problems are named.
    expect(rejection(f)).toBe(
      'recipes[0].create.users[0]._alias: must be a non-empty string; ' +
        '_ref "buyer" in recipes[0].create.orders[0].userId matches no _alias; ' +
        '_ref "buyer" in recipes[0].create.orders[0].lines[0].reservedFor matches no _alias; ' +
        '_ref "buyer" in recipes[0].create.orders[0].meta.placedBy matches no _alias',
    );
  });

  test.each([
    ['empty', ''],
    ['a number', 7],
    ['an object', { alias: 'buyer' }],
  ])('a _ref that is %s', (_label, ref) => {
    const f = withChange((f) => (f.recipes[0].create.orders[0].userId = { _ref: ref }));
    expect(rejection(f)).toBe(
      'recipes[0].create.orders[0].userId._ref: must be a non-empty string (an _alias)',
    );
  });

  test('several problems are named together, at most five', () => {
    const two = withChange((f) => {
      delete f.source.discoverPath;
      f.recipes[0].validation.phase = 'down';
    });
    expect(rejection(two)).toBe('source.discoverPath: required; recipes[0].validation.phase: must be "ok"');
    const seven = withChange((f) => {
      f.recipes[0].create.notes = Array.from({ length: 7 }, (_, i) => ({ name: `{{t${i}}}` }));
    });
    expect(rejection(seven)).toBe(
      `${[0, 1, 2, 3, 4]
        .map(
          (i) =>
            `unknown token {{t${i}}} in recipes[0].create.notes[${i}].name: tokens that resolve to nothing`,
        )
        .join('; ')} (and 2 more)`,
    );
  });
});

describe('testRunShortId', () => {
  test('is the first 8 hex characters of the SHA-256 of the testRunId', () => {
    // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad (FIPS 180-2 example)
    expect(testRunShortId('abc')).toBe('ba7816bf');
    expect(testRunShortId('run_01HZX')).toBe('d29e6e96');
  });

  test('matches node:crypto for any id', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (id) => {
        const expected = createHash('sha256').update(id, 'utf8').digest('hex').slice(0, 8);
        expect(testRunShortId(id)).toBe(expected);
        expect(testRunShortId(id)).toMatch(/^[0-9a-f]{8}$/);
      }),
    );
  });
});

describe('validateRecipesFile properties', () => {
  const name = fc.stringMatching(/^[a-z][a-zA-Z0-9]{0,7}$/);
  const text = fc.string().map((s) => s.replace(/[{}]/g, ''));
  const scalar = fc.oneof(
    text,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.constantFrom('{{testRunId}}', 'u-{{testRunShortId}}', '{{testRunId}}/{{testRunShortId}}'),
  );

  /** A create graph: rows spread over models, every alias declared once, every ref to a declared alias. */
  const graph = fc.integer({ min: 1, max: 5 }).chain((aliasCount) => {
    const aliases = Array.from({ length: aliasCount }, (_, i) => `row${i}`);
    const ref = fc.constantFrom(...aliases).map((a) => ({ _ref: a }));
    const { value } = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof(
        { maxDepth: 3 },
        scalar,
        ref,
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(name, tie('value'), { maxKeys: 3 }),
      ),
    }));
    const row = fc.dictionary(name, value, { maxKeys: 4 });
    return fc
      .record({
        models: fc.uniqueArray(name, { minLength: 1, maxLength: 4 }),
        aliased: fc.array(row, { minLength: aliasCount, maxLength: aliasCount }),
        plain: fc.array(row, { maxLength: 3 }),
        seed: fc.nat(),
      })
      .map(({ models, aliased, plain, seed }) => {
        const create: Record<string, Json[]> = Object.fromEntries(models.map((m) => [m, []]));
        const rows = [...aliased.map((r, i) => ({ ...r, _alias: aliases[i] })), ...plain];
        for (const [i, r] of rows.entries()) create[models[(i + seed) % models.length]!]!.push(r);
        return create;
      });
  });
  const fileWith = (create: Json): Json => withChange((f) => (f.recipes[0].create = create));
  const firstRow = (create: Record<string, Json[]>) => {
    const model = Object.keys(create).find((m) => create[m]!.length > 0)!;
    return { model, row: create[model]![0] };
  };

  test('any graph whose refs all point to declared aliases is accepted', () => {
    fc.assert(
      fc.property(graph, (create) => {
        expect(validateRecipesFile(fileWith(create))).toEqual({ recipeCount: 1 });
      }),
    );
  });

  test('any token other than the two built-ins is rejected, named', () => {
    const token = fc
      .string({ minLength: 0, maxLength: 12 })
      .map((s) => `{{${s.replace(/[{}]/g, '')}}}`)
      .filter((t) => t !== '{{testRunId}}' && t !== '{{testRunShortId}}');
    fc.assert(
      fc.property(graph, token, text, (create, tok, around) => {
        const { model, row } = firstRow(create);
        row.injected = `${around}${tok}${around}`;
        expect(rejection(fileWith(create))).toBe(
          `unknown token ${tok} in recipes[0].create.${model}[0].injected: tokens that resolve to nothing`,
        );
      }),
    );
  });

  test('a ref to an undeclared alias is rejected, named', () => {
    fc.assert(
      fc.property(graph, name, (create, alias) => {
        const { model, row } = firstRow(create);
        row.dangling = { _ref: `missing-${alias}` };
        expect(rejection(fileWith(create))).toBe(
          `_ref "missing-${alias}" in recipes[0].create.${model}[0].dangling matches no _alias`,
        );
      }),
    );
  });
});
