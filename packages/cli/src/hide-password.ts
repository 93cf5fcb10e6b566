/** Passwords out of everything the command prints: `--db` and `JOBS_DATABASE_URL` hold them. */

/** Query parameters that carry a password (libpq's `password`, `sslpassword`; mysql2's). */
const PASSWORD_PARAM = /([?&;][\w.-]*(?:pass(?:word)?|pwd)=)[^&;#]*/gi;

/** The schemes `--db` takes. */
const OUR_SCHEMES = new Set(['postgres', 'postgresql', 'mysql', 'mariadb', 'sqlite', 'file']);

/** Where the passwords in `text` are: `[start, end)` spans, in order, not overlapping. */
function passwordSpans(text: string): [number, number][] {
  const spans: [number, number][] = [];
  const at = text.lastIndexOf('@');
  if (at >= 0) {
    // `scheme://` starts the user info; so does one of our schemes followed by a single colon
    // (`postgres:app:secret@db`). Any other `word:` is a user name (`app:secret@db`).
    const scheme = /^([a-z][a-z0-9+.-]*):(\/\/)?/i.exec(text);
    const start =
      scheme && (scheme[2] || OUR_SCHEMES.has((scheme[1] as string).toLowerCase()))
        ? scheme[0].length
        : 0;
    const colon = text.slice(start, at).indexOf(':');
    if (colon >= 0) spans.push([start + colon + 1, at]);
  }
  for (const match of text.matchAll(PASSWORD_PARAM)) {
    const start = (match.index ?? 0) + (match[1] as string).length;
    const end = (match.index ?? 0) + match[0].length;
    // Inside the user info (an `@` later in the text): hidden with it already.
    if (!spans.some(([from, to]) => start < to && end > from)) spans.push([start, end]);
  }
  return spans.sort((a, b) => a[0] - b[0]);
}

/**
 * The text with every password in it replaced by `***`, whatever the form, parsable or not:
 * `scheme://user:password@host`, `user:password@host` (no scheme), a password holding `/`, `@`,
 * `:`, `#`, `?` or `%` unencoded, and `?password=` parameters. The user info runs to the *last*
 * `@` (a password may hold `@`; a host never does), so an `@` later in the text hides more than
 * the password, never less.
 */
export function hidePassword(text: string): string {
  let hidden = text;
  for (const [start, end] of passwordSpans(text).reverse()) {
    hidden = `${hidden.slice(0, start)}***${hidden.slice(end)}`;
  }
  return hidden;
}

/**
 * The passwords in `text` (a `--db` value) as written and URL-decoded, for hiding them in a
 * driver's message that echoes one outside any URL. Passwords shorter than four characters are
 * left out: hiding every `a` in a message would make it unreadable.
 */
export function passwordsIn(text: string): string[] {
  const found = new Set<string>();
  for (const [start, end] of passwordSpans(text)) {
    const secret = text.slice(start, end);
    found.add(secret);
    try {
      found.add(decodeURIComponent(secret));
    } catch {
      // Not valid percent-encoding: the text as written is all there is.
    }
  }
  return [...found].filter((secret) => secret.length >= 4);
}

/**
 * `message` with passwords hidden: in every word of it that holds a URL's user info or a
 * password parameter, and wherever a password of `sources` (the `--db` values and
 * `JOBS_DATABASE_URL`) appears on its own, as a driver's message might echo it.
 */
export function hidePasswords(message: string, sources: readonly string[] = []): string {
  let hidden = message
    .split(/(\s+)/)
    .map((word) => {
      // The URL in a quoted or bracketed word starts at its scheme, or after the punctuation.
      const start = word.search(/[a-z][a-z0-9+.-]*:\/\/|[^'"`(<[{=]/i);
      return start <= 0
        ? hidePassword(word)
        : word.slice(0, start) + hidePassword(word.slice(start));
    })
    .join('');
  // Longest first: a password that holds another is hidden whole.
  const secrets = [...new Set(sources.flatMap(passwordsIn))].sort((a, b) => b.length - a.length);
  for (const secret of secrets) hidden = hidden.split(secret).join('***');
  return hidden;
}

/** The database values of a command line: each `--db <value>` / `--db=<value>`, and the env's. */
export function databaseValues(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const values: string[] = [];
  argv.forEach((arg, i) => {
    if (arg === '--db' && argv[i + 1] !== undefined) values.push(argv[i + 1] as string);
    else if (arg.startsWith('--db=')) values.push(arg.slice('--db='.length));
  });
  if (env.JOBS_DATABASE_URL !== undefined) values.push(env.JOBS_DATABASE_URL);
  return values;
}
