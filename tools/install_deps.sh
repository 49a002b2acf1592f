#!/usr/bin/env bash
# Installs what building and testing tokensieve needs: Debian packages and the PyPI packages of
# requirements-test.txt. Safe to run repeatedly; skips apt when everything is already present.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium + chromium-driver: the server's web page is tested in headless Chromium through selenium.
apt_packages=(g++ clang cmake ninja-build pkg-config libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
              libcpp-httplib-dev python3-pip unzip chromium chromium-driver)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -r requirements-test.txt
