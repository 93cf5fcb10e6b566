/**
 * HTML output: every value goes through `escapeHtml`, once, by the `html` template tag. Only
 * markup built by `html` itself passes unescaped, so a payload holding `<script>` shows as text.
 */

/** Markup that is already safe: built by `html`. */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** The one escape function: text → HTML text, safe in element content and quoted attributes. */
export function escapeHtml(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (ch) => ESCAPES[ch] ?? ch);
}

/** A value for `html`: escaped, unless it is `SafeHtml`; arrays are joined; null/false vanish. */
export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(value);
}

/**
 * Template tag: `html\`<td>${job.type}</td>\`` escapes `job.type`.
 */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i += 1) {
    out += render(values[i] as HtmlValue) + (strings[i + 1] ?? '');
  }
  return new SafeHtml(out);
}
