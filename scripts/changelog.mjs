#!/usr/bin/env node
// Writes each package's CHANGELOG.md "Unreleased" section from the pending changesets
// (.changeset/*.md: the frontmatter names the packages and their bump, the body is the entry),
// without `changeset version` (which would bump versions and delete the changesets). Sections of
// released versions — what `changeset version` adds under the title — are kept as they are.
//
//   node scripts/changelog.mjs            write packages/*/CHANGELOG.md
//   node scripts/changelog.mjs --check    fail when one is stale (run by `pnpm check:docs`)
//   --root <dir>                          another repository root (the self-test's)
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const BUMPS = ['major', 'minor', 'patch'];
const TITLES = { major: 'Major changes', minor: 'Minor changes', patch: 'Patch changes' };

/** A changeset file: `{ releases: Map<package, bump>, body }`. */
export function parseChangeset(text, file) {
  const match = /^---\r?\n([\s\S]*?)\r?\n?---\r?\n([\s\S]*)$/.exec(text);
  if (!match) throw new Error(`${file}: no frontmatter (--- … ---)`);
  const releases = new Map();
  for (const line of match[1].split(/\r?\n/)) {
    if (!line.trim()) continue;
    const release = /^\s*["']?([^"':]+)["']?\s*:\s*(major|minor|patch)\s*$/.exec(line);
    if (!release) throw new Error(`${file}: cannot read "${line}" (want "@scope/name": patch)`);
    releases.set(release[1], release[2]);
  }
  return { releases, body: match[2].trim() };
}

/** A list item of a changelog: the body's first line after "- ", the rest indented under it. */
function entry(body) {
  return `- ${body
    .split('\n')
    .map((line, i) => (i === 0 || line === '' ? line : `  ${line}`))
    .join('\n')}`;
}

/** The CHANGELOG.md text of package `name`, given its current text and its pending changes. */
export function changelog(name, current, changes) {
  const released = [];
  if (current) {
    // Keep every "## <version>" section; drop the old Unreleased one and the title.
    const sections = current.split(/^(?=## )/m).slice(1);
    for (const section of sections) if (!/^## Unreleased\b/.test(section)) released.push(section);
  }
  let text = `# ${name}\n\n`;
  if (changes.length > 0) {
    text += '## Unreleased\n\n';
    text += 'Pending changes, from the changesets in `.changeset/` (not yet released).\n\n';
    for (const bump of BUMPS) {
      const items = changes.filter((change) => change.bump === bump);
      if (items.length === 0) continue;
      text += `### ${TITLES[bump]}\n\n${items.map((item) => entry(item.body)).join('\n\n')}\n\n`;
    }
  } else if (released.length === 0) {
    text += 'No changes yet.\n\n';
  }
  text += released.map((section) => section.replace(/\s*$/, '\n\n')).join('');
  return `${text.replace(/\s*$/, '')}\n`;
}

/** Every package's CHANGELOG.md as it should read: `[{ path, name, text, current }]`. */
export function changelogs(root) {
  const changesetDir = join(root, '.changeset');
  const changesets = readdirSync(changesetDir)
    .filter((file) => file.endsWith('.md') && file !== 'README.md')
    .sort()
    .map((file) => parseChangeset(readFileSync(join(changesetDir, file), 'utf8'), file));
  const out = [];
  for (const dir of readdirSync(join(root, 'packages')).sort()) {
    const manifest = join(root, 'packages', dir, 'package.json');
    if (!existsSync(manifest)) continue;
    const { name, private: unpublished } = JSON.parse(readFileSync(manifest, 'utf8'));
    if (unpublished) continue; // a private package (tests) has no releases
    const changes = changesets
      .filter((changeset) => changeset.releases.has(name) && changeset.body)
      .map((changeset) => ({ bump: changeset.releases.get(name), body: changeset.body }));
    const path = join(root, 'packages', dir, 'CHANGELOG.md');
    const current = existsSync(path) ? readFileSync(path, 'utf8') : null;
    out.push({ path, name, text: changelog(name, current, changes), current });
  }
  return out;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--root');
  const root = resolve(
    at >= 0 ? process.argv[at + 1] : join(dirname(fileURLToPath(import.meta.url)), '..'),
  );
  const check = process.argv.includes('--check');
  const logs = changelogs(root);
  const stale = logs.filter((log) => log.text !== log.current);
  if (check) {
    if (stale.length > 0) {
      console.error(
        `changelog: stale (the changesets changed): ${stale.map((log) => log.name).join(', ')}; run \`node scripts/changelog.mjs\` and commit the CHANGELOG.md files`,
      );
      process.exit(1);
    }
    console.log(`changelog: ${logs.length} CHANGELOG.md files match the changesets`);
  } else {
    for (const log of stale) writeFileSync(log.path, log.text);
    console.log(`changelog: wrote ${stale.length} of ${logs.length} CHANGELOG.md files`);
  }
}
