import { describe, expect, test } from '@jest/globals';
import { ValidationError } from '../../shared/errors.js';
import { issuePath } from '../../shared/validation.js';
import { parseTestsFile, toTestItem } from './definitions.js';

describe('tests file', () => {
  const good = {
    name: 'T',
    folder: { id: 'f1', name: 'F' },
    application_version: { name: 'v1', path: '/v1' },
    steps: [{ instruction: 'Click', interaction: 'click', url: 'u', element: { html: 'h', selector: 's' } }],
  };

  test('issuePath writes array indexes in brackets', () => {
    expect(issuePath([0, 'steps', 2, 'element', 'html'])).toBe('[0].steps[2].element.html');
    expect(issuePath([])).toBe('');
    expect(issuePath(['recipes', 0, 'create', 'users', 1])).toBe('recipes[0].create.users[1]');
    expect(issuePath(['env', 'my key'])).toBe('env["my key"]');
  });
  test('toTestItem gives fresh test and step ids and defaults variables', () => {
    const [parsed] = parseTestsFile([good]);
    const a = toTestItem('org1', parsed!, '2026-01-01T00:00:00.000Z');
    const b = toTestItem('org1', parsed!, '2026-01-01T00:00:00.000Z');
    expect(a.testId).not.toBe(b.testId);
    expect(a.steps[0]!.id).not.toBe(b.steps[0]!.id);
    expect(a).toEqual({
      testId: a.testId,
      orgId: 'org1',
      name: 'T',
      createdAt: '2026-01-01T00:00:00.000Z',
      folder: { id: 'f1', name: 'F' },
      applicationVersion: { name: 'v1', path: '/v1' },
      variables: {},
      steps: [{ id: a.steps[0]!.id, ...good.steps[0] }],
    });
  });
  test('an invalid file is a ValidationError naming each path', () => {
    const bad = [good, { ...good, name: '', steps: [{ ...good.steps[0], interaction: 3 }] }];
    expect(() => parseTestsFile(bad)).toThrow(ValidationError);
    expect(() => parseTestsFile(bad)).toThrow(
      'invalid tests file: [1].name: must not be empty; [1].steps[0].interaction: Invalid input: expected string, received number',
    );
  });
  test("an unknown key is refused by name, at every level, with the file's other problems", () => {
    const misspelt = [
      good,
      good,
      { ...good, run_on_preveiw: true, retires: 2 },
      {
        ...good,
        name: '',
        folder: { ...good.folder, colour: 'red' },
        steps: [{ ...good.steps[0], selector: '#x', element: { ...good.steps[0]!.element, css: 'a' } }],
      },
    ];
    expect(() => parseTestsFile(misspelt)).toThrow(
      new ValidationError(
        'invalid tests file: [2].run_on_preveiw: unknown key; [2].retires: unknown key; ' +
          '[3].name: must not be empty; [3].folder.colour: unknown key; [3].steps[0].element.css: unknown key; ' +
          '[3].steps[0].selector: unknown key',
      ),
    );
    // Spelt right, the same keys are taken.
    const [, , fixed] = parseTestsFile([good, good, { ...good, run_on_preview: true, retries: 2 }]);
    expect(fixed).toMatchObject({ run_on_preview: true, retries: 2 });
  });
});
