#!/usr/bin/env bash
# Installs the Node packages of the server's end-to-end tests (OpenAI's client, playwright-core)
# from their lock file. Idempotent: does nothing when both are installed at their pinned versions.
set -euo pipefail
cd "$(dirname "$0")/../tests/server/e2e"
installed() {  # name version
  [ -f "node_modules/$1/package.json" ] && node -e "process.exit(require('./node_modules/$1/package.json').version === '$2' ? 0 : 1)"
}
if installed openai 7.60.0 && installed playwright-core 1.65.1; then
  echo "e2e: node packages present"
  exit 0
fi
echo "e2e: installing openai and playwright-core (npm ci)"
npm ci --no-audit --no-fund --loglevel=error
