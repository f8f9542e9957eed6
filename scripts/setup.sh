#!/usr/bin/env bash
# Installs everything Tangram needs on a fresh Debian 12 machine (run as root or with sudo);
# with --tests, also what only the test suites use.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-openmp-dev        # BLAS for prefill (OpenMP variant nests safely with our pool)
  libpcre2-dev                  # pre-tokeniser regexes (\p{L}, lookahead, JIT)
  nlohmann-json3-dev libfmt-dev libcli11-dev
  libcpp-httplib-dev prometheus-cpp-dev   # HTTP client of `tangram bench-serve`; Prometheus metrics of `tangram serve`
  zlib1g-dev                    # gzip/deflate request bodies (inflated within --max-body)
  libxxhash-dev                 # XXH3 checksums and fingerprints of serialised sessions
  libhiredis-dev                # Redis client for the shared session tier (--kv-redis)
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev sentencepiece   # reference oracle for the SentencePiece tokenizer tests
  python3 python3-jinja2        # reference Jinja renderer for the chat-template tests
)
# Only the tests need these (scripts/test.sh passes --tests).
TEST_PACKAGES=(
  curl chromium                 # server end-to-end tests: raw SSE bytes, the chat page in a headless browser
  clang libclang-rt-14-dev libomp-dev llvm   # fuzz stage: clang's libFuzzer + sanitizer runtimes, OpenMP
                                # for clang, llvm-symbolizer for readable reports (scripts/fuzz.sh)
  clang-format                  # the formatting check (scripts/check-format.sh)
  python3-torch python3-sentencepiece python3-numpy   # the training recipe's self-test (tools/train)
  systemd libopenblas0          # the Debian package's test: systemd-analyze verify of its unit, and
                                # OpenBLAS's runtime package, which the .deb depends on, for dpkg -i
)
# The scale-out deployment (scripts/cluster.sh) and its test: Redis as the shared session tier,
# HAProxy as the session-affine load balancer.
CLUSTER_PACKAGES=(redis-server haproxy curl)
case "${1:-}" in
  --tests) PACKAGES+=("${TEST_PACKAGES[@]}" "${CLUSTER_PACKAGES[@]}") ;;
  --cluster) PACKAGES+=("${CLUSTER_PACKAGES[@]}") ;;
esac

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# Node.js runs the llama.cpp oracle (tools/oracle). The machine image ships Node 20 with npm; only
# install Debian's if none is there.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
