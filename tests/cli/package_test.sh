#!/usr/bin/env bash
# The Debian package end to end. It installs the package on this machine and removes it again,
# so it runs as root only (CI's fresh machine; elsewhere it is skipped) and never over a tangram
# package already installed.
#   1. cpack builds the .deb from the release tree; dpkg -i installs it
#   2. the unit passes systemd-analyze verify; the system user and state folders exist
#   3. the unit's own ExecStart line, run as the unit's user with a model put where the packaged
#      settings name it, answers /health and a chat request (the port is moved to a free one)
#   4. dpkg -r leaves only the settings and the state; dpkg -P leaves only the model the admin
#      put there, and no file of the package
#   package_test.sh BUILD_DIR MODEL
set -euo pipefail
build="$(realpath "${1:?usage: package_test.sh BUILD_DIR MODEL}")"
model="$(realpath "${2:?usage: package_test.sh BUILD_DIR MODEL}")"
if [ "$(id -u)" -ne 0 ]; then
  echo "package test: skipped (it installs a package: root only)"
  exit 77
fi
if dpkg-query -W -f='${Status}' tangram 2>/dev/null | grep -q installed; then
  echo "package test: skipped (a tangram package is installed here; not touching it)"
  exit 77
fi
for tool in cpack dpkg systemd-analyze runuser curl; do
  command -v "$tool" >/dev/null || { echo "package test: $tool is missing (scripts/setup.sh --tests)" >&2; exit 1; }
done

work="$(mktemp -d)"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  dpkg -P tangram >/dev/null 2>&1 || true
  rm -rf /var/lib/tangram/models/model.gguf "$work"
  rmdir /var/lib/tangram/models /var/lib/tangram 2>/dev/null || true
}
trap cleanup EXIT
fail() { echo "package test: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$work" >/dev/null)
deb="$(ls "$work"/tangram_*.deb)"
dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' | grep -v '/$' > "$work/files"
dpkg -i "$deb" > "$work/dpkg-i.log"

# 2. What the package installed.
unit=/usr/lib/systemd/system/tangram.service
[ -x /usr/bin/tangram ] || fail "no /usr/bin/tangram"
[ -f "$unit" ] || fail "no unit at $unit"
[ -f /etc/tangram/serve.toml ] || fail "no /etc/tangram/serve.toml"
systemd-analyze verify "$unit" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "the unit does not verify"; }
# verify only warns about unknown keys and bad values: a warning about the unit fails too.
if grep "tangram.service" "$work/verify.log"; then fail "systemd-analyze verify warns about the unit"; fi
getent passwd tangram >/dev/null || fail "no system user tangram"
[ "$(stat -c %U /var/lib/tangram/sessions)" = tangram ] || fail "/var/lib/tangram/sessions is not the service user's"
grep -q "systemctl start tangram" "$work/dpkg-i.log" || fail "the install does not say how to start the service"

# 3. The unit's ExecStart, as its user, in its working directory, with the packaged settings.
exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
[ -n "$exec_start" ] || fail "the unit has no ExecStart"
install -o tangram -g tangram -m 0640 "$model" /var/lib/tangram/models/model.gguf
cd /var/lib/tangram
# shellcheck disable=SC2086  # the unit's command line, split as systemd splits it
runuser -u tangram -- $exec_start --port 0 > "$work/serve.log" 2>&1 &
server=$!
port=""
for _ in $(seq 1 300); do
  port="$(grep -o 'listening on [^ ]*:[0-9]*' "$work/serve.log" | grep -o '[0-9]*$' || true)"
  [ -n "$port" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; fail "the service exited"; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log"; fail "the service never listened"; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] || fail "/health is not 200"
curl -s "http://127.0.0.1:$port/v1/models" | grep -q '"id":"model"' || fail "the served model is not the packaged settings' model.gguf"
reply="$(curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":8,"temperature":0}')"
echo "$reply" | grep -q '"completion_tokens":8' || fail "chat did not answer: $reply"
kill "$server"
wait "$server" 2>/dev/null || true
server=""
cd /

# 4. Remove: only the settings and the state stay. Purge: only the admin's model stays.
dpkg -r tangram > /dev/null
while read -r f; do
  case "$f" in
    /etc/tangram/serve.toml) [ -f "$f" ] || fail "remove took the settings $f" ;;
    *) [ ! -e "$f" ] || fail "remove left $f" ;;
  esac
done < "$work/files"
[ -f /var/lib/tangram/models/model.gguf ] || fail "remove took the admin's model"
dpkg -P tangram > /dev/null
while read -r f; do [ ! -e "$f" ] || fail "purge left $f"; done < "$work/files"
[ ! -e /etc/tangram ] || fail "purge left /etc/tangram"
[ ! -e /var/lib/tangram/sessions ] || fail "purge left the saved conversations"
! getent passwd tangram >/dev/null || fail "purge left the system user"
[ -f /var/lib/tangram/models/model.gguf ] || fail "purge took the admin's model"
echo "package test: installed, verified, served /health and a chat, removed and purged cleanly"
