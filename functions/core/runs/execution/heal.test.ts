import { describe, expect, test } from '@jest/globals';
import type { ElementFeatures } from '../../../ports/browser/port.js';
import {
  decide,
  describeCandidate,
  HEAL_THRESHOLD,
  healedLine,
  instructionCue,
  rankCandidates,
  refusedHeal,
  selectorProposals,
  similarity,
  textSimilarity,
} from './heal.js';

/** A feature record as the page reports one (visible, not editable unless said). */
const el = (f: Partial<ElementFeatures> & { tag: string }): ElementFeatures => ({
  classes: [],
  aria: {},
  text: '',
  visible: true,
  editable: false,
  interactive: f.tag === 'button' || f.tag === 'a' || f.tag === 'input',
  parent: -1,
  depth: 1,
  ...f,
});

const email = el({
  tag: 'input',
  id: 'email',
  name: 'email',
  type: 'email',
  placeholder: 'Email address',
  classes: ['field'],
  editable: true,
});

describe('similarity', () => {
  test('text: equal 1, shared words partly, nothing shared 0', () => {
    expect(textSimilarity('Sign  up', 'sign up')).toBe(1);
    expect(textSimilarity('Sign up', 'Sign up now')).toBeCloseTo(2 / 3);
    expect(textSimilarity('Save', 'Delete')).toBe(0);
    expect(textSimilarity('', 'x')).toBe(0);
  });

  test('an id renamed keeps the rest of the recording: above the threshold', () => {
    const renamed = { ...email, id: 'mail-input' };
    const s = similarity({ recorded: email, cue: '', kind: 'input-text' }, renamed);
    expect(s).toBeGreaterThan(HEAL_THRESHOLD);
    expect(s).toBeLessThan(1);
  });

  test('a sibling of the same tag and classes but another text is below it', () => {
    const recorded = el({ tag: 'button', classes: ['btn'], text: 'Delete' });
    const sibling = el({ tag: 'button', classes: ['btn'], text: 'Save' });
    expect(similarity({ recorded, cue: '', kind: 'click' }, sibling)).toBeLessThan(HEAL_THRESHOLD);
  });

  test('from the instruction alone: less sure, and a button over a paragraph saying the same', () => {
    const button = el({ tag: 'button', text: 'Sign up' });
    const para = el({ tag: 'p', text: 'Sign up', interactive: false });
    const target = { cue: 'Sign up', kind: 'click' };
    expect(similarity(target, button)).toBeLessThan(1);
    expect(similarity(target, button)).toBeGreaterThan(similarity(target, para));
  });
});

describe('decide', () => {
  test('heals to the clear best', () => {
    const page = [
      el({ tag: 'input', id: 'phone', name: 'phone', type: 'tel', placeholder: 'Phone', editable: true }),
      { ...email, id: 'mail' },
    ];
    const target = { recorded: email, cue: '', kind: 'input-text' };
    const verdict = decide(rankCandidates(target, page), page);
    expect(verdict.chosen?.index).toBe(1);
  });

  test('two look-alikes are never guessed between', () => {
    const recorded = el({ tag: 'button', classes: ['btn'], text: 'Save', id: 'save' });
    const page = [
      el({ tag: 'button', classes: ['btn'], text: 'Save' }),
      el({ tag: 'button', classes: ['btn'], text: 'Save' }),
    ];
    const verdict = decide(rankCandidates({ recorded, cue: '', kind: 'click' }, page), page);
    expect(verdict.chosen).toBeUndefined();
    if (!verdict.chosen) {
      expect(verdict.closest).toHaveLength(2);
      expect(refusedHeal('#save', verdict.closest)).toMatch(
        /^#save matched nothing; closest: button "Save" 0\.\d\d, button "Save" 0\.\d\d: too close to tell apart$/,
      );
    }
  });

  test('a wrapper saying the same as its button is not its rival', () => {
    const recorded = el({ tag: 'button', id: 'go', text: 'Go' });
    const page = [
      el({ tag: 'div', text: 'Go', interactive: false }),
      el({ tag: 'button', text: 'Go', parent: 0, depth: 2 }),
    ];
    const verdict = decide(rankCandidates({ recorded, cue: '', kind: 'click' }, page), page);
    expect(verdict.chosen?.index).toBe(1);
  });

  test('an element that cannot take text is no candidate of input-text', () => {
    const recorded = el({ tag: 'input', id: 'q', placeholder: 'Search', editable: true });
    const page = [el({ tag: 'div', placeholder: 'Search', interactive: false })];
    expect(rankCandidates({ recorded, cue: '', kind: 'input-text' }, page)).toEqual([]);
    expect(refusedHeal('#q', [])).toBe('#q matched nothing; no element of the page is like it');
  });

  test('an element gone: the closest named with scores, none close enough', () => {
    const recorded = el({ tag: 'button', classes: ['btn'], text: 'Delete', id: 'del' });
    const page = [el({ tag: 'button', classes: ['btn'], text: 'Save', name: 'save' })];
    const verdict = decide(rankCandidates({ recorded, cue: '', kind: 'click' }, page), page);
    expect(verdict.chosen).toBeUndefined();
    if (!verdict.chosen)
      expect(refusedHeal('#del', verdict.closest)).toMatch(
        /^#del matched nothing; closest: button\[name="save"\] 0\.\d\d: none close enough$/,
      );
  });
});

describe('the new selector and the words', () => {
  test("proposals in Playwright's order: test id, role and name, placeholder, text, id, name", () => {
    const f = el({
      tag: 'button',
      testId: 'signup',
      testIdAttr: 'data-testid',
      role: 'button',
      text: 'Sign up',
      id: 'su',
      name: 'n',
    });
    expect(selectorProposals(f)).toEqual([
      '[data-testid="signup"]',
      'role=button[name="Sign up"]',
      'text="Sign up"',
      '#su',
      'button[name="n"]',
    ]);
    expect(selectorProposals(el({ tag: 'input', placeholder: 'Say "hi"' }))).toEqual([
      'input[placeholder="Say \\"hi\\""]',
    ]);
    expect(describeCandidate(el({ tag: 'input', name: 'mail' }))).toBe('input[name="mail"]');
    expect(healedLine('#email', 'input[name="mail"]', 0.8)).toBe(
      'healed: #email → input[name="mail"] (0.80)',
    );
  });

  test('the words naming the element: quoted, or the instruction without its verb', () => {
    expect(instructionCue('Click "Sign up"', 'click')).toBe('Sign up');
    expect(instructionCue('Click Sign up', 'click')).toBe('Sign up');
    expect(instructionCue('Click the Sign up button', 'click')).toBe('Sign up');
    expect(instructionCue('Type "ada@x.org" into the email field', 'input-text')).toBe('email');
    expect(instructionCue('Type {{variable:EMAIL}} into Email', 'input-text')).toBe('Email');
  });
});
