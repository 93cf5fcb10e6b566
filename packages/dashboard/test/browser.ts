/** One Chromium for a test file (Debian's, driven by playwright-core). */
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/', import.meta.url));

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no Chromium at ${CHROMIUM}: install it (\`apt-get install -y chromium\`, as .ci/run does) or set CHROMIUM_PATH`,
    );
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    // evil.example resolves to this machine, as a DNS-rebinding page's name does.
    args: [
      '--no-sandbox',
      '--disable-dev-shm-usage',
      '--host-resolver-rules=MAP evil.example 127.0.0.1',
    ],
  });
}
