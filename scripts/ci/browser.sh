#!/usr/bin/env bash
# Installs what the browser tests (tests/test_web_browser.py) need: Debian's Chromium and its
# WebDriver. Browser downloads by test tools (Selenium Manager, Playwright) fail on machines
# without general internet access, so the tests use these two binaries only:
#   /usr/bin/chromium, /usr/bin/chromedriver
# Idempotent; as root it installs with apt-get, otherwise it prints the command to run.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

have() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed; }

missing=()
for p in chromium chromium-driver; do have "$p" || missing+=("$p"); done
# fonts so screenshots show text (Chromium depends on a font, but not always a complete one)
have fonts-dejavu-core || missing+=(fonts-dejavu-core)

if [ ${#missing[@]} -eq 0 ]; then
  echo "browser: $(chromium --version 2>/dev/null || echo chromium) and $(chromedriver --version 2>/dev/null | cut -d' ' -f1-2) present"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "browser tests need: sudo apt-get install ${missing[*]} (they skip without them)"
  exit 0
fi
echo "browser: installing ${missing[*]}"
# another apt may hold the lock for a while (a shared machine): wait for it rather than fail
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "browser: $(chromium --version) / $(chromedriver --version | cut -d' ' -f1-2)"
