#!/usr/bin/env bash
# Builds the Debian package of tangram (binary, data, systemd unit, settings in /etc/tangram)
# into build/package/, from the release preset. Install it with
#   apt install ./build/package/tangram_<version>_amd64.deb
# (docs/serving.md, "Running as a service").
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target tangram
mkdir -p build/package
(cd build/release && cpack -G DEB -B "$PWD/../package")
ls -1 build/package/*.deb
