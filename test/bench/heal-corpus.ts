/**
 * The corpus of `npm run bench:heal` and of the healing tests: page changes as they happen to recorded
 * browser tests, generated as (before, after) HTML pairs. Each of twelve widgets (an email field, a
 * submit button, a nav link, a heading, an alert…) sits in the same small page among look-alike
 * neighbours (other fields, buttons and links); each of twelve kinds of change is applied to it. A
 * case's step is what a recorder would have kept from the `before` page: the widget's selector, its outer
 * HTML and an instruction. In `after`, the element the step should act on carries `data-bench-target`
 * (an attribute healing never reads); a case whose element is gone or ambiguous has none and must fail.
 */

export type ChangeKind =
  | 'id-renamed'
  | 'classes-renamed'
  | 'attributes-reordered'
  | 'wrapper-added'
  | 'sibling-inserted'
  | 'decoy-inserted'
  | 'text-reworded'
  | 'element-moved'
  | 'tag-changed'
  | 'element-removed'
  | 'look-alikes'
  | 'instruction-only';

export const CHANGE_KINDS: ChangeKind[] = [
  'id-renamed',
  'classes-renamed',
  'attributes-reordered',
  'wrapper-added',
  'sibling-inserted',
  'decoy-inserted',
  'text-reworded',
  'element-moved',
  'tag-changed',
  'element-removed',
  'look-alikes',
  'instruction-only',
];

export interface HealCase {
  name: string;
  kind: ChangeKind;
  interaction: string;
  instruction: string;
  /** What the recording kept. */
  selector: string;
  html: string;
  before: string;
  after: string;
  /** Whether a correct step acts on the marked element (false: the step must fail). */
  healable: boolean;
}

/** A widget: its element as attribute pairs, its text, and the step a recorder made of it. */
interface Widget {
  key: string;
  tag: string;
  attrs: [string, string][];
  text: string;
  interaction: string;
  instruction: string;
  /** A look-alike neighbour's attributes and text (another field, another button). */
  decoy: { attrs: [string, string][]; text: string };
  /** Slightly reworded text (or placeholder), and the tag it may become. */
  reworded: { attr?: string; value: string };
  newTag: string;
}

const WIDGETS: Widget[] = [
  {
    key: 'email',
    tag: 'input',
    attrs: [
      ['id', 'email'],
      ['name', 'email'],
      ['type', 'email'],
      ['class', 'field field-email'],
      ['placeholder', 'Email address'],
    ],
    text: '',
    interaction: 'input-text',
    instruction: 'Type "ada@example.com" into the email field',
    decoy: {
      attrs: [
        ['name', 'phone'],
        ['type', 'tel'],
        ['class', 'field field-phone'],
        ['placeholder', 'Phone number'],
      ],
      text: '',
    },
    reworded: { attr: 'placeholder', value: 'Your email address' },
    newTag: 'textarea',
  },
  {
    key: 'password',
    tag: 'input',
    attrs: [
      ['id', 'password'],
      ['name', 'password'],
      ['type', 'password'],
      ['class', 'field'],
      ['placeholder', 'Password'],
    ],
    text: '',
    interaction: 'input-text',
    instruction: 'Type "s3cret-pass" into Password',
    decoy: {
      attrs: [
        ['name', 'username'],
        ['type', 'text'],
        ['class', 'field'],
        ['placeholder', 'Username'],
      ],
      text: '',
    },
    reworded: { attr: 'placeholder', value: 'Your password' },
    newTag: 'textarea',
  },
  {
    key: 'search',
    tag: 'input',
    attrs: [
      ['id', 'q'],
      ['type', 'search'],
      ['class', 'search-box'],
      ['aria-label', 'Search products'],
    ],
    text: '',
    interaction: 'press',
    instruction: 'Press "Enter"',
    decoy: {
      attrs: [
        ['type', 'text'],
        ['class', 'search-box'],
        ['aria-label', 'Coupon code'],
      ],
      text: '',
    },
    reworded: { attr: 'aria-label', value: 'Search all products' },
    newTag: 'textarea',
  },
  {
    key: 'signup',
    tag: 'button',
    attrs: [
      ['id', 'signup'],
      ['type', 'button'],
      ['class', 'btn btn-primary'],
    ],
    text: 'Sign up',
    interaction: 'click',
    instruction: 'Click "Sign up"',
    decoy: {
      attrs: [
        ['type', 'button'],
        ['class', 'btn btn-secondary'],
      ],
      text: 'Log in',
    },
    reworded: { value: 'Sign up now' },
    newTag: 'a',
  },
  {
    key: 'pricing',
    tag: 'a',
    attrs: [
      ['id', 'pricing'],
      ['class', 'nav-link'],
      ['href', '#pricing'],
    ],
    text: 'Pricing',
    interaction: 'click',
    instruction: 'Click Pricing',
    decoy: {
      attrs: [
        ['class', 'nav-link'],
        ['href', '#blog'],
      ],
      text: 'Blog',
    },
    reworded: { value: 'Pricing plans' },
    newTag: 'button',
  },
  {
    key: 'title',
    tag: 'h1',
    attrs: [
      ['id', 'title'],
      ['class', 'page-title'],
    ],
    text: 'Welcome back',
    interaction: 'assert-text',
    instruction: 'Check the heading says "Welcome back"',
    decoy: { attrs: [['class', 'page-subtitle']], text: 'Your dashboard' },
    reworded: { value: 'Welcome back, Ada' },
    newTag: 'h2',
  },
  {
    key: 'notice',
    tag: 'div',
    attrs: [
      ['id', 'notice'],
      ['class', 'alert alert-success'],
      ['role', 'alert'],
    ],
    text: 'Your changes were saved',
    interaction: 'assert-visible',
    instruction: 'See the saved notice',
    decoy: {
      attrs: [
        ['class', 'alert alert-info'],
        ['role', 'status'],
      ],
      text: 'Autosave is on',
    },
    reworded: { value: 'All your changes were saved' },
    newTag: 'p',
  },
  {
    key: 'banner',
    tag: 'section',
    attrs: [
      ['id', 'banner'],
      ['class', 'promo'],
      ['aria-label', 'Spring sale'],
    ],
    text: 'Spring sale: 20% off everything',
    interaction: 'wait-for',
    instruction: 'Wait for the spring sale banner',
    decoy: {
      attrs: [
        ['class', 'promo'],
        ['aria-label', 'Newsletter'],
      ],
      text: 'Join our newsletter',
    },
    reworded: { value: 'Spring sale: 20% off almost everything' },
    newTag: 'aside',
  },
  {
    key: 'comment',
    tag: 'textarea',
    attrs: [
      ['id', 'comment'],
      ['name', 'comment'],
      ['class', 'field'],
      ['placeholder', 'Write a comment'],
    ],
    text: '',
    interaction: 'input-text',
    instruction: 'Type "Looks good" into the comment box',
    decoy: {
      attrs: [
        ['name', 'notes'],
        ['class', 'field'],
        ['placeholder', 'Private notes'],
      ],
      text: '',
    },
    reworded: { attr: 'placeholder', value: 'Write your comment' },
    newTag: 'input',
  },
  {
    key: 'cart',
    tag: 'button',
    attrs: [
      ['id', 'add'],
      ['data-testid', 'add-to-cart'],
      ['class', 'btn'],
      ['type', 'button'],
    ],
    text: 'Add to cart',
    interaction: 'click',
    instruction: 'Click "Add to cart"',
    decoy: {
      attrs: [
        ['data-testid', 'add-to-wishlist'],
        ['class', 'btn'],
        ['type', 'button'],
      ],
      text: 'Add to wishlist',
    },
    reworded: { value: 'Add to basket' },
    newTag: 'a',
  },
  {
    key: 'close',
    tag: 'button',
    attrs: [
      ['id', 'close'],
      ['class', 'icon-btn'],
      ['aria-label', 'Close dialog'],
      ['type', 'button'],
    ],
    text: '×',
    interaction: 'click',
    instruction: 'Click the close button',
    decoy: {
      attrs: [
        ['class', 'icon-btn'],
        ['aria-label', 'Minimize dialog'],
        ['type', 'button'],
      ],
      text: '_',
    },
    reworded: { attr: 'aria-label', value: 'Close this dialog' },
    newTag: 'a',
  },
  {
    key: 'qty',
    tag: 'input',
    attrs: [
      ['id', 'qty'],
      ['name', 'quantity'],
      ['type', 'text'],
      ['class', 'field field-small'],
      ['placeholder', 'Quantity'],
    ],
    text: '',
    interaction: 'input-text',
    instruction: 'Type "3" into Quantity',
    decoy: {
      attrs: [
        ['name', 'size'],
        ['type', 'text'],
        ['class', 'field field-small'],
        ['placeholder', 'Size'],
      ],
      text: '',
    },
    reworded: { attr: 'placeholder', value: 'Quantity wanted' },
    newTag: 'textarea',
  },
];

const VOID = new Set(['input']);
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

function render(tag: string, attrs: [string, string][], text: string, mark = false): string {
  const all = mark ? [...attrs, ['data-bench-target', '1'] as [string, string]] : attrs;
  const a = all.map(([k, v]) => ` ${k}="${esc(v)}"`).join('');
  if (VOID.has(tag)) return `<${tag}${a}>`;
  return `<${tag}${a}>${esc(text)}</${tag}>`;
}

const set = (attrs: [string, string][], key: string, value: string | undefined): [string, string][] => {
  const out = attrs.filter(([k]) => k !== key);
  if (value === undefined) return out;
  const at = attrs.findIndex(([k]) => k === key);
  out.splice(at < 0 ? out.length : at, 0, [key, value]);
  return out;
};
const idOf = (w: Widget) => w.attrs.find(([k]) => k === 'id')?.[1] as string;

/**
 * The page around a widget: a header nav, a form of neighbours, the widget's own slot `#slot` (a
 * container whose first child it is), a footer. `parts` fills the slot and the spot above the form.
 */
function page(slot: string, top = ''): string {
  return `<!doctype html><html><head><title>Shop</title><style>body{font:14px sans-serif} .hidden{display:none}</style></head><body>
<header><nav class="nav"><a class="nav-link" href="#home">Home</a> <a class="nav-link" href="#docs">Docs</a> <a class="nav-link" href="#about">About</a></nav></header>
<main id="main">${top}
<form id="form" onsubmit="return false">
<label for="first">First name</label><input id="first" name="first" class="field" placeholder="First name">
<label for="last">Last name</label><input id="last" name="last" class="field" placeholder="Last name">
<button type="button" class="btn btn-secondary" id="cancel">Cancel</button>
<div id="slot">${slot}</div>
</form>
<p class="note">Prices include VAT.</p>
</main>
<footer><a class="nav-link" href="#terms">Terms</a> <span>© Shop</span></footer>
</body></html>`;
}

function caseOf(w: Widget, kind: ChangeKind): HealCase {
  const id = idOf(w);
  const recorded = render(w.tag, w.attrs, w.text);
  const before = page(recorded);
  const renamed = set(w.attrs, 'id', `${id}-v2`);
  const base = { interaction: w.interaction, instruction: w.instruction, html: recorded, before };
  const name = `${kind}/${w.key}`;
  const target = (attrs: [string, string][], text = w.text, tag = w.tag) => render(tag, attrs, text, true);
  const decoy = render(w.tag, w.decoy.attrs, w.decoy.text);
  switch (kind) {
    case 'id-renamed':
      return { ...base, name, kind, selector: `#${id}`, after: page(target(renamed)), healable: true };
    case 'classes-renamed': {
      const classes = w.attrs.find(([k]) => k === 'class')?.[1] ?? '';
      const sel = `#slot ${w.tag}.${classes.split(' ').join('.')}`;
      const attrs = set(
        set(
          w.attrs,
          'class',
          classes
            .split(' ')
            .map((c) => `x-${c.replace(/-/g, '_')}`)
            .join(' '),
        ),
        'id',
        undefined,
      );
      return { ...base, name, kind, selector: sel, after: page(target(attrs)), healable: true };
    }
    case 'attributes-reordered':
      return {
        ...base,
        name,
        kind,
        selector: `#${id}`,
        after: page(target([...w.attrs].reverse())),
        healable: true,
      };
    case 'wrapper-added':
      return {
        ...base,
        name,
        kind,
        selector: `#slot > ${w.tag}:first-child`,
        after: page(`<span class="wrap">${target(w.attrs)}</span>`),
        healable: true,
      };
    case 'sibling-inserted':
      return {
        ...base,
        name,
        kind,
        selector: `#slot > ${w.tag}:first-child`,
        after: page(`<p class="hint">Fields marked * are required.</p>${target(w.attrs)}`),
        healable: true,
      };
    case 'decoy-inserted':
      return {
        ...base,
        name,
        kind,
        selector: `#${id}`,
        after: page(`${decoy}${target(renamed)}`),
        healable: true,
      };
    case 'text-reworded': {
      const attrs = w.reworded.attr ? set(renamed, w.reworded.attr, w.reworded.value) : renamed;
      const text = w.reworded.attr ? w.text : w.reworded.value;
      return { ...base, name, kind, selector: `#${id}`, after: page(target(attrs, text)), healable: true };
    }
    case 'element-moved':
      return {
        ...base,
        name,
        kind,
        selector: `#slot > #${id}`,
        after: page('', `<div class="toolbar">${target(w.attrs)}</div>`),
        healable: true,
      };
    case 'tag-changed': {
      const attrs = w.newTag === 'a' ? set(set(w.attrs, 'type', undefined), 'href', '#go') : w.attrs;
      return {
        ...base,
        name,
        kind,
        selector: `${w.tag}#${id}`,
        after: page(
          target(
            set(attrs, 'type', w.newTag === 'input' ? 'text' : attrs.find(([k]) => k === 'type')?.[1]),
            w.text,
            w.newTag,
          ),
        ),
        healable: true,
      };
    }
    case 'element-removed':
      return { ...base, name, kind, selector: `#${id}`, after: page(decoy), healable: false };
    case 'look-alikes': {
      const twin = render(
        w.tag,
        renamed.filter(([k]) => k !== 'id'),
        w.text,
      );
      return { ...base, name, kind, selector: `#${id}`, after: page(`${twin}${twin}`), healable: false };
    }
    case 'instruction-only': {
      // Healable only when the instruction names the element (`Press "Enter"` names none).
      const named = !['search', 'title'].includes(w.key);
      const after = page(`${decoy}${named ? target(renamed) : render(w.tag, renamed, w.text)}`);
      return { ...base, html: '', name, kind, selector: `#${id}`, after, healable: named };
    }
  }
}

/** Every case: each kind of change applied to each widget (144). */
export function healCorpus(): HealCase[] {
  return CHANGE_KINDS.flatMap((kind) => WIDGETS.map((w) => caseOf(w, kind)));
}
