#!/bin/sh
# The dashboard's tests drive a real Chromium: Debian's, since playwright-core cannot download a
# browser here. Installs it when it is missing and this runs as root (a fresh CI machine);
# otherwise says what to install. Part of `pnpm test`, so the README's test command needs nothing
# else.
set -u
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "@jobs/dashboard tests: no Chromium at $CHROMIUM; install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH" >&2
  exit 1
fi
echo "@jobs/dashboard tests: installing chromium (apt-get)"
for attempt in 1 2 3; do
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
    break
  fi
  echo "@jobs/dashboard tests: chromium install attempt $attempt failed; retrying" >&2
  sleep $((attempt * 5))
done
[ -x "$CHROMIUM" ] || { echo "@jobs/dashboard tests: chromium could not be installed" >&2; exit 1; }
