#!/usr/bin/env node
// Fails when a relative link or #anchor in a Markdown file does not resolve: every tracked (or
// new, not ignored) *.md file of the repository — README, docs, packages, examples, bench — is
// read, its links outside code are collected, and each must name a file or folder that exists
// and, with an #anchor, a heading (GitHub's slugs) or an `id`/`name` anchor in the Markdown file
// it points to (a folder's README.md); source files take GitHub's line anchors (#L12, #L12-L20).
// External links (https:, mailto:…) are not fetched.
//
//   node scripts/check-links.mjs [--root <dir>]
//
// In a folder that is not a git work tree (the self-test's), every *.md file under it is read.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SKIPPED_DIRS = new Set(['node_modules', '.git', 'dist', '.turbo', 'coverage']);

/** The Markdown files to check, relative to `root`. */
function markdownFiles(root) {
  try {
    const out = execFileSync(
      'git',
      ['ls-files', '--cached', '--others', '--exclude-standard', '-z', '--', '*.md'],
      { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
    );
    return out
      .split('\0')
      .filter(Boolean)
      .filter((file) => existsSync(join(root, file)));
  } catch {
    return walk(root, root);
  }
}

function walk(root, dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (!SKIPPED_DIRS.has(name)) out.push(...walk(root, path));
    } else if (name.endsWith('.md')) out.push(relative(root, path));
  }
  return out.sort();
}

/** GitHub's heading slug (github-slugger): lower case, punctuation dropped, spaces → '-'. */
export function slug(text) {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The text a heading renders to: code spans, links, emphasis and tags reduced to their text. */
function headingText(raw) {
  return raw
    .replace(/`+([^`]*)`+/g, '$1')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/[*~]/g, '')
    .replace(/(^|\s)_+|_+(?=\s|$)/g, '$1')
    .trim();
}

/**
 * Reads a Markdown file into its lines outside fenced code and HTML comments (code spans
 * blanked, so what looks like a link inside them is not one), and the anchors it defines.
 */
export function parseMarkdown(text) {
  const lines = [];
  const anchors = new Set();
  const seen = new Map();
  const addHeading = (raw) => {
    const base = slug(headingText(raw));
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  };
  let fence = null;
  let inComment = false;
  let previous = '';
  for (const [index, line] of text.split(/\r?\n/).entries()) {
    if (fence) {
      if (line.trimStart().startsWith(fence)) fence = null;
      previous = '';
      continue;
    }
    const opening = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (opening) {
      fence = opening[1];
      previous = '';
      continue;
    }
    let visible = line;
    if (inComment) {
      const end = visible.indexOf('-->');
      if (end < 0) continue;
      visible = visible.slice(end + 3);
      inComment = false;
    }
    visible = visible.replace(/<!--.*?-->/g, '');
    const start = visible.indexOf('<!--');
    if (start >= 0) {
      visible = visible.slice(0, start);
      inComment = true;
    }
    for (const match of visible.matchAll(/<a\s[^>]*(?:id|name)\s*=\s*"([^"]+)"/gi)) {
      anchors.add(match[1]);
    }
    const atx = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+\s*)?$/.exec(visible);
    if (atx) addHeading(atx[1]);
    else if (
      /^\s{0,3}(=+|-+)\s*$/.test(visible) &&
      previous.trim() &&
      !/^\s*[-*+|>]/.test(previous)
    ) {
      addHeading(previous);
    }
    previous = visible;
    lines.push({
      number: index + 1,
      text: visible.replace(/(`+)[^`]*?\1/g, (span) => ' '.repeat(span.length)),
    });
  }
  return { lines, anchors };
}

/** The link targets of a line: inline links and images, and reference definitions. */
function targetsOf(text) {
  const out = [];
  for (const match of text.matchAll(/\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) {
    out.push(match[1].replace(/^<|>$/g, ''));
  }
  const definition = /^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(text);
  if (definition) out.push(definition[1].replace(/^<|>$/g, ''));
  return out;
}

/** Checks every Markdown file under `root`; returns one line per broken link. */
export function checkLinks(root) {
  const files = markdownFiles(root);
  const parsed = new Map();
  const read = (file) => {
    if (!parsed.has(file)) parsed.set(file, parseMarkdown(readFileSync(join(root, file), 'utf8')));
    return parsed.get(file);
  };
  const problems = [];
  let links = 0;
  for (const file of files) {
    for (const { number, text } of read(file).lines) {
      for (const target of targetsOf(text)) {
        if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//'))
          continue;
        links++;
        const problem = checkTarget(root, file, target, read);
        if (problem) problems.push(`${file}:${number}: ${target} — ${problem}`);
      }
    }
  }
  return { files: files.length, links, problems };
}

function checkTarget(root, file, target, read) {
  const hash = target.indexOf('#');
  const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash)).replace(
    /\?.*$/,
    '',
  );
  const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
  let resolved = file;
  if (pathPart !== '') {
    const absolute = pathPart.startsWith('/')
      ? join(root, pathPart)
      : resolve(root, dirname(file), pathPart);
    if (!existsSync(absolute)) return 'no such file';
    resolved = relative(root, absolute);
    if (relative(root, absolute).startsWith('..')) return 'outside the repository';
    if (statSync(absolute).isDirectory()) {
      if (anchor === null) return null;
      resolved = join(resolved, 'README.md');
      if (!existsSync(join(root, resolved))) return 'an anchor into a folder without README.md';
    }
  }
  if (anchor === null || anchor === '') return null;
  if (!resolved.endsWith('.md')) {
    return /^L\d+(-L\d+)?$/.test(anchor) ? null : 'an anchor into a file that is not Markdown';
  }
  const { anchors } = read(resolved);
  return anchors.has(anchor.toLowerCase()) || anchors.has(anchor) ? null : `no heading #${anchor}`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--root');
  const root = resolve(
    at >= 0 ? process.argv[at + 1] : join(dirname(fileURLToPath(import.meta.url)), '..'),
  );
  const { files, links, problems } = checkLinks(root);
  if (problems.length > 0) {
    console.error(`check-links: ${problems.length} broken link(s) in ${files} Markdown files:`);
    for (const problem of problems) console.error(`  ${problem}`);
    process.exit(1);
  }
  console.log(`check-links: ${links} relative links in ${files} Markdown files resolve`);
}
