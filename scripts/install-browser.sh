#!/bin/sh
# What the test suite needs beyond Python, Java and PyPI, from Debian's packages:
# chromium for the page's browser test (tests/http/test_page_browser.py, marker
# "browser", driven by Python's playwright) and curl for the README's HTTP session.
# Does nothing when both are there.
set -eu
missing=""
[ -x /usr/bin/chromium ] || missing="$missing chromium"
command -v curl > /dev/null 2>&1 || missing="$missing curl"
if [ -z "$missing" ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update
# shellcheck disable=SC2086 # one word per package
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
