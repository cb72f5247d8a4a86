/**
 * Text made safe to put in HTML, in an element's content or a quoted attribute value: the five characters
 * that could open a tag, an entity or end an attribute become entities. One function for every page the
 * service renders (the run report, the local dashboard, the local front door's pages).
 */
const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ENTITIES[c] as string);
