#!/usr/bin/env bash
# Installs the Debian packages the book's PDF and the browser tests need: Chromium, CJK fonts (the Chinese
# terms), emoji fonts (the checkers' ✅/❌), and with --tests poppler-utils (the PDF test reads the PDF).
# Only when they are missing and we may (root with apt-get, as in CI); otherwise the PDF build says what is
# missing, and the tests skip with the reason (in CI they fail). Run by build_book.sh and test.sh.
set -euo pipefail
packages=(chromium fonts-wqy-microhei fonts-noto-color-emoji)
if [ "${1:-}" = "--tests" ]; then
    packages+=(poppler-utils)
fi
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null && command -v dpkg-query > /dev/null; then
    missing=()
    for package in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2> /dev/null | grep -q "ok installed" || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "system_packages.sh: installing ${missing[*]} with apt-get"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
    fi
fi
