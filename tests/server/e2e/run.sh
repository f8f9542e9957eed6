#!/usr/bin/env bash
# CTest entry of the server's end-to-end tests: runs every *.test.mjs (OpenAI's, Anthropic's and
# Ollama's clients (chat, tools, embeddings), curl SSE, the Vercel AI SDK and LangChain, hostile requests, 64-client load,
# the chat page in headless Chromium, kill -9 with --kv-disk, scale-out: Redis + 2 replicas +
# HAProxy with a replica killed) against `tangram serve` on the real TinyStories model in
# data/models.
#   run.sh /path/to/tangram [suite ...]   (suites: names like hostile or protocol; default all)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="$(realpath "${1:?usage: run.sh /path/to/tangram [suite ...]}")"  # absolute: the suites run from this folder
shared="${TANGRAM_DATA_DIR:-$root/data}"
model="$shared/models/stories260K/stories260K.gguf"
if [ ! -f "$model" ]; then
  echo "server e2e: $model is missing: the repository's data/ is incomplete (or TANGRAM_DATA_DIR is wrong)" >&2
  exit 1
fi
for package in openai @anthropic-ai/sdk ollama playwright-core ai @ai-sdk/openai-compatible @langchain/openai zod ajv; do
  [ -d "$here/node_modules/$package" ] || { echo "server e2e: node package $package missing: run scripts/e2e-setup.sh" >&2; exit 1; }
done
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "server e2e: Chromium is missing: run scripts/setup.sh (Debian package chromium)" >&2
  exit 1
fi
for tool in redis-server haproxy curl; do
  command -v "$tool" >/dev/null || { echo "server e2e: $tool is missing: run scripts/setup.sh --tests" >&2; exit 1; }
done
cd "$here"
export TANGRAM_BIN="$bin" TANGRAM_MODEL="$model"
shift
suites=()
for name in "$@"; do
  [ -f "./$name.test.mjs" ] || { echo "server e2e: no suite $name.test.mjs" >&2; exit 2; }
  suites+=("./$name.test.mjs")
done
((${#suites[@]})) || suites=(./*.test.mjs)
exec node --test --test-concurrency=1 "${suites[@]}"
