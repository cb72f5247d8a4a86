import { describe, expect, it } from '@jest/globals';
import { escapeHtml } from './html.js';

describe('escapeHtml', () => {
  it('turns the five markup characters into entities', () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
      '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;',
    );
  });

  it('escapes an ampersand once, so an entity in the text stays visible as written', () => {
    expect(escapeHtml('&lt;')).toBe('&amp;lt;');
  });

  it('leaves other text, non-ASCII included, as it is', () => {
    expect(escapeHtml('acme/shop #7 — ünïcode ✓')).toBe('acme/shop #7 — ünïcode ✓');
    expect(escapeHtml('')).toBe('');
  });
});
