#!/bin/sh
# Debian's chromium for the page's browser test (tests/http/test_page_browser.py,
# marker "browser"), driven by Python's playwright. Does nothing when it is there.
set -eu
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
