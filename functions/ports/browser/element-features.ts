/*
 * The in-page half of a step's healing (core/runs/execution/heal.ts scores what this collects): one
 * script, run in the page by `evaluateHandle`, that parses the recorded element's HTML (a `<template>`:
 * nothing of it runs or loads) and reads the same features of it and of every element of the page's
 * body, in document order, each naming its nearest candidate ancestor. It returns `{ data, els }`:
 * `data` the feature records (port.ts `ElementFeatures`), `els` the elements, kept in the page for
 * `pinSelector`. A string, so the page runs exactly this (no bundler helpers) and the Node side needs
 * no DOM types.
 */

/** At most this many elements are read (a larger page is read in document order up to it). */
export const MAX_CANDIDATES = 5000;

export const COLLECT_FEATURES = `(html) => {
  const MAX = ${MAX_CANDIDATES};
  const SKIP = new Set(['SCRIPT','STYLE','TEMPLATE','NOSCRIPT','META','LINK','BR','HEAD','TITLE','SVG','PATH','OPTION']);
  const TEXT_TYPES = new Set(['', 'text','email','password','search','tel','url','number','date','datetime-local','month','time','week']);
  const TEST_IDS = ['data-testid','data-test-id','data-test','data-cy','data-qa'];
  const squash = (s, n = 200) => (s || '').replace(/\\s+/g, ' ').trim().slice(0, n);
  const implicitRole = (el, tag, type) => {
    if (tag === 'button') return 'button';
    if (tag === 'a') return el.hasAttribute('href') ? 'link' : undefined;
    if (tag === 'textarea') return 'textbox';
    if (tag === 'select') return 'combobox';
    if (tag === 'img') return 'img';
    if (/^h[1-6]$/.test(tag)) return 'heading';
    if (tag === 'input') {
      if (['button','submit','reset','image'].includes(type)) return 'button';
      if (type === 'checkbox') return 'checkbox';
      if (type === 'radio') return 'radio';
      if (type === 'search') return 'searchbox';
      if (TEXT_TYPES.has(type) && type !== 'number') return 'textbox';
      if (type === 'number') return 'spinbutton';
    }
    if (tag === 'nav') return 'navigation';
    if (tag === 'li') return 'listitem';
    return undefined;
  };
  const labelOf = (el, doc) => {
    const by = el.getAttribute('aria-labelledby');
    if (by && doc) {
      const t = by.split(/\\s+/).map((id) => doc.getElementById(id)?.textContent || '').join(' ');
      if (squash(t)) return squash(t);
    }
    if (el.labels && el.labels.length) return squash(el.labels[0].textContent);
    const wrap = el.closest && el.closest('label');
    if (wrap && wrap !== el) return squash(wrap.textContent);
    return undefined;
  };
  const features = (el, live) => {
    const tag = el.tagName.toLowerCase();
    const attr = (n) => { const v = el.getAttribute(n); return v === null || v === '' ? undefined : v; };
    const type = tag === 'input' ? (el.getAttribute('type') || 'text').toLowerCase() : attr('type');
    const aria = {};
    let ariaLabel;
    for (const a of el.attributes) {
      if (!a.name.startsWith('aria-')) continue;
      if (a.name === 'aria-label') ariaLabel = squash(a.value);
      else if (a.name !== 'aria-labelledby' && a.name !== 'aria-describedby') aria[a.name] = a.value;
    }
    let testId, testIdAttr;
    for (const n of TEST_IDS) { const v = attr(n); if (v) { testId = v; testIdAttr = n; break; } }
    const editable = (tag === 'input' && TEXT_TYPES.has(type)) || tag === 'textarea' || el.isContentEditable === true || el.getAttribute('contenteditable') === 'true';
    const role = attr('role') || implicitRole(el, tag, type);
    const interactive = ['a','button','input','select','textarea','summary','label'].includes(tag) ||
      ['button','link','checkbox','radio','tab','menuitem','option','switch','textbox','combobox'].includes(role || '') ||
      el.hasAttribute('onclick') || editable;
    let visible = true;
    if (live) {
      visible = el.checkVisibility ? el.checkVisibility({ checkOpacity: false, checkVisibilityCSS: true }) : el.getClientRects().length > 0;
      if (visible && el.getClientRects().length === 0) visible = false;
    }
    const value = tag === 'input' ? (live ? el.value : attr('value')) : undefined;
    const href = tag === 'a' ? attr('href') : undefined;
    const f = {
      tag, classes: [...el.classList].sort(), aria, text: squash(el.textContent), visible, editable, interactive,
      parent: -1, depth: 0,
    };
    const put = (k, v) => { if (v !== undefined && v !== '') f[k] = v; };
    put('id', attr('id')); put('name', attr('name')); put('type', type); put('placeholder', attr('placeholder'));
    put('ariaLabel', ariaLabel); put('role', role); put('label', labelOf(el, live ? document : undefined));
    put('testId', testId); put('testIdAttr', testIdAttr); put('href', href); put('alt', attr('alt'));
    put('title', attr('title')); put('value', squash(value || '', 80) || undefined);
    return f;
  };
  let recorded;
  if (html && html.trim()) {
    const t = document.createElement('template');
    t.innerHTML = html.trim();
    const el = t.content.firstElementChild;
    if (el) recorded = features(el, false);
  }
  const els = [];
  const data = [];
  const index = new Map();
  const walk = document.body ? document.body.querySelectorAll('*') : [];
  for (const el of walk) {
    if (els.length >= MAX) break;
    if (SKIP.has(el.tagName.toUpperCase())) continue;
    const f = features(el, true);
    let p = el.parentElement;
    while (p && !index.has(p)) p = p.parentElement;
    if (p) { f.parent = index.get(p); f.depth = data[f.parent].depth + 1; }
    index.set(el, els.length);
    els.push(el);
    data.push(f);
  }
  return { data: { recorded, candidates: data }, els };
}`;

/** The in-page fallback of `pinSelector`: a CSS path of `nth-of-type` steps from the nearest id. */
export const CSS_PATH = `(el) => {
  const steps = [];
  for (let e = el; e && e.nodeType === 1 && e !== document.documentElement; e = e.parentElement) {
    if (e.id && /^[A-Za-z_][\\w-]*$/.test(e.id) && document.querySelectorAll('#' + e.id).length === 1) {
      steps.unshift('#' + e.id);
      return steps.join(' > ');
    }
    const tag = e.tagName.toLowerCase();
    const same = e.parentElement ? [...e.parentElement.children].filter((c) => c.tagName === e.tagName) : [e];
    steps.unshift(same.length > 1 ? tag + ':nth-of-type(' + (same.indexOf(e) + 1) + ')' : tag);
  }
  return steps.join(' > ');
}`;
