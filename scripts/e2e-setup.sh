#!/usr/bin/env bash
# Installs the Node packages of the server's end-to-end tests (OpenAI's, Anthropic's and Ollama's
# clients, playwright-core, the Vercel AI SDK, LangChain, zod) from their lock file. Idempotent:
# does nothing when all are installed at their pinned versions.
set -euo pipefail
cd "$(dirname "$0")/../tests/server/e2e"
installed() {  # name version
  [ -f "node_modules/$1/package.json" ] && node -e "process.exit(require('./node_modules/$1/package.json').version === '$2' ? 0 : 1)"
}
# package.json pins exact versions: name@version of each.
read -ra pinned <<< "$(node -p "Object.entries(require('./package.json').dependencies).map(([n, v]) => n + '@' + v).join(' ')")"
missing=0
for p in "${pinned[@]}"; do
  installed "${p%@*}" "${p##*@}" || missing=1
done
if [ "$missing" = 0 ]; then
  echo "e2e: node packages present"
  exit 0
fi
echo "e2e: installing ${pinned[*]} (npm ci)"
npm ci --no-audit --no-fund --loglevel=error
