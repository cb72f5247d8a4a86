import { describe, expect, test } from '@jest/globals';
import { isSecretVariable } from './executor.js';

describe('which variable values are masked', () => {
  test('a name that says secret is masked; an e-mail or a user name is not', () => {
    for (const name of [
      'PASSWORD',
      'db_pass',
      'API_TOKEN',
      'ClientSecret',
      'PRIVATE_KEY',
      'AWS_CREDENTIALS',
      'AUTH',
      'SESSION_COOKIE',
    ])
      expect([name, isSecretVariable(name)]).toEqual([name, true]);
    for (const name of ['EMAIL', 'USERNAME', 'FIRST_NAME', 'URL', 'COUNT'])
      expect([name, isSecretVariable(name)]).toEqual([name, false]);
  });

  test('a name the tests file marks secret is masked whatever it says; only that name', () => {
    expect(isSecretVariable('EMAIL', ['EMAIL'])).toBe(true);
    expect(isSecretVariable('USERNAME', ['EMAIL'])).toBe(false);
    expect(isSecretVariable('email', ['EMAIL'])).toBe(false);
    expect(isSecretVariable('PASSWORD', [])).toBe(true);
  });
});
