#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: it installs what the
# tests need (Go modules, the npm clients of the end-to-end tests), validates
# docker-compose.yml where docker-compose exists, then runs vet and the whole
# Go test suite (with a replica-set run through testcontainers when a Docker
# engine is reachable). MONGODB_URI, when set, runs the same tests
# against that MongoDB as well as the embedded store's defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

# apt_install installs Debian packages when this runs as root with apt-get,
# updating the package lists once.
apt_updated=""
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  if [ -z "$apt_updated" ]; then apt-get update -qq >/dev/null 2>&1 || return 1; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1
}

# apt_install_program installs a package that a test runs as a program of
# its own, and stops (and disables) the package's service where the
# package started one. Arguments after the package go to apt-get.
apt_install_program() { # package [apt-get options]
  local pkg=$1; shift
  if apt_install "$@" "$pkg"; then
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$pkg" 2>/dev/null; then
      systemctl disable --now "$pkg" >/dev/null 2>&1 || true
    fi
  else
    echo "could not install $pkg"
  fi
}

echo "== go modules"
go mod download

# gotestsum runs go test and counts what passed, failed and was skipped (with
# each skip's reason); count_tests prints one store's line of those counts
# from its JSON file, and counts collects the lines for the end of the run.
gotestsum() { go run gotest.tools/gotestsum@v1.12.3 "$@"; }
counts=""
count_tests() { # store-name json-file
  local p s f
  p=$(grep '"Action":"pass"' "$2" | grep -c '"Test":' || true)
  s=$(grep '"Action":"skip"' "$2" | grep -c '"Test":' || true)
  f=$(grep '"Action":"fail"' "$2" | grep -c '"Test":' || true)
  counts="$counts$1: $p passed, $s skipped, $f failed (tests and subtests)"$'\n'
  echo "$1: $p passed, $s skipped, $f failed (tests and subtests)"
}
json_dir=$(mktemp -d)
# pkg_times prints one store's time per package (the test binary's run, not
# its build) from its JSON file, longest first, and its slowest tests;
# times collects them for the end of the run, beside the counts.
times=""
pkg_times() { # store-name json-file
  local table slow
  table=$(awk '
    /"Test":/ { next }
    /"Action":"(pass|fail)"/ {
      if (!match($0, /"Package":"[^"]*"/)) next
      pkg = substr($0, RSTART + 11, RLENGTH - 12)
      if (!match($0, /"Elapsed":[0-9.]+/)) next
      el = substr($0, RSTART + 10, RLENGTH - 10) + 0
      printf "%10.1f %-4s %s\n", el, ($0 ~ /"Action":"fail"/) ? "FAIL" : "ok", pkg
    }' "$2" | sort -rn | awk '{ s = $1 + 0; printf "  %3dm%04.1fs  %-4s %s\n", int(s / 60), s - 60 * int(s / 60), $2, $3 }')
  slow=$(gotestsum tool slowest --jsonfile "$2" --threshold 20s 2>/dev/null | head -10 | sed 's/^/  /' || true)
  times="$times$1, time per package:"$'\n'"$table"$'\n'
  [ -z "$slow" ] || times="$times$1, tests over 20s:"$'\n'"$slow"$'\n'
}

echo "== vet"
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== npm clients of the end-to-end tests"
if command -v npm >/dev/null 2>&1; then
  (cd integration/e2e && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "npm not found: the end-to-end test will skip (and fail under CI=true)"
fi

# --- MCP conformance suite ---------------------------------------------------
echo "== MCP conformance suite (and the Node 22 it needs)"
if command -v npm >/dev/null 2>&1; then
  (cd integration/e2e/conformance && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "npm not found: the conformance test will skip (and fail under CI=true)"
fi
# --- end of the conformance block -------------------------------------------

echo "== mongosh, for the analyst queries of docs/analyst-queries.md"
if command -v npm >/dev/null 2>&1; then
  (cd integration/mongosh && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "npm not found: the analyst queries run through the Go driver instead of mongosh"
fi

echo "== docker-compose.yml"
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Debian's docker-compose validates the file; no Docker engine is needed for that.
  apt_install docker-compose || echo "could not install docker-compose"
fi
# The passwords come from .env (scripts/compose-env.sh), which CI does not
# have: the file is validated with placeholders there, and without them
# compose must refuse it (no service starts with an empty password).
compose_placeholders="MONGO_ROOT_PASSWORD=placeholder OUTREACH_DB_PASSWORD=placeholder"
if command -v docker-compose >/dev/null 2>&1; then
  if [ ! -e .env ] && env -u MONGO_ROOT_PASSWORD -u OUTREACH_DB_PASSWORD docker-compose -f docker-compose.yml config -q 2>/dev/null; then
    echo "docker-compose.yml accepted an empty MongoDB password"; exit 1
  fi
  env $compose_placeholders docker-compose -f docker-compose.yml config -q && echo "valid"
  env $compose_placeholders OUTREACH_PUBLIC_URL=https://outreach.example.com \
    docker-compose -f docker-compose.yml --profile public config -q && echo "valid (profile public)"
elif docker compose version >/dev/null 2>&1; then
  env $compose_placeholders docker compose -f docker-compose.yml config -q && echo "valid"
  env $compose_placeholders OUTREACH_PUBLIC_URL=https://outreach.example.com \
    docker compose -f docker-compose.yml --profile public config -q && echo "valid (profile public)"
else
  echo "docker-compose is not installed: docker-compose.yml not validated (skipped)"
fi

echo "== Dovecot (a real IMAP server for the email sync tests)"
if ! command -v dovecot >/dev/null 2>&1 && [ ! -x /usr/sbin/dovecot ]; then
  apt_install dovecot-imapd || echo "could not install dovecot-imapd"
fi
if command -v dovecot >/dev/null 2>&1 || [ -x /usr/sbin/dovecot ]; then
  echo "$( (dovecot --version || /usr/sbin/dovecot --version) 2>/dev/null | head -1)"
else
  echo "Dovecot is not installed: the IMAP tests will skip (and fail under CI=true)"
fi

echo "== Chromium (a real browser signs in and approves on the OAuth pages)"
if ! command -v chromium >/dev/null 2>&1; then
  apt_install chromium || echo "could not install chromium"
fi
if command -v chromium >/dev/null 2>&1; then
  chromium --version 2>/dev/null | head -1
else
  echo "Chromium is not installed: the browser sign-in test will skip (and fail under CI=true)"
fi

echo "== Caddy (the public proxy of docker/Caddyfile, run in front of the service)"
# The package's own service is not wanted (the test runs Caddy on free
# loopback ports): where the package starts it, it is stopped.
command -v caddy >/dev/null 2>&1 || apt_install_program caddy
if command -v caddy >/dev/null 2>&1; then
  echo "Caddy $(caddy version 2>/dev/null | head -1)"
else
  echo "Caddy is not installed: the test through Caddy will skip (and fail under CI=true)"
fi

echo "== Prometheus (Debian's 2.42, scraping the service in the tests)"
# The package's own service is not wanted (the test runs Prometheus on a
# free loopback port): where the package starts it, it is stopped, so
# nothing stays on 9090. The recommended node exporter is left out.
command -v prometheus >/dev/null 2>&1 || apt_install_program prometheus --no-install-recommends
if command -v prometheus >/dev/null 2>&1; then
  echo "Prometheus $(prometheus --version 2>&1 | head -1)"
else
  echo "Prometheus is not installed: the test scraping with Prometheus will skip (and fail under CI=true)"
fi

echo "== pdftotext (poppler, reading the rendered PDFs' right-to-left text back)"
command -v pdftotext >/dev/null 2>&1 || apt_install_program poppler-utils --no-install-recommends
if command -v pdftotext >/dev/null 2>&1; then
  pdftotext -v 2>&1 | head -1
else
  echo "pdftotext is not installed: the PDF's right-to-left test will skip (and fail under CI=true)"
fi

echo "== Postfix and Dovecot LMTP (real mail servers for the pitch sending tests)"
if ! [ -x /usr/sbin/postfix ] || ! [ -x /usr/lib/dovecot/lmtp ]; then
  # postfix's own start is not wanted: the tests run private instances.
  apt_install postfix dovecot-lmtpd || echo "could not install postfix dovecot-lmtpd"
fi
if [ -x /usr/sbin/postfix ] && [ -x /usr/lib/dovecot/lmtp ]; then
  echo "Postfix $(/usr/sbin/postconf -h mail_version 2>/dev/null), Dovecot LMTP"
else
  echo "Postfix or Dovecot LMTP is not installed: the pitch sending tests will skip (and fail under CI=true)"
fi

echo "== tests (the embedded store)"
failed=""
# Every query the service's own indexes answer is asked of the store too, and
# a test fails where the two answers differ (docs/performance.md: "The service's indexes").
OUTREACH_INDEX_CHECK=1 gotestsum --format pkgname --jsonfile "$json_dir/embedded.json" -- -count=1 -timeout 40m -skip '^TestReplicaSet$' ./... \
  || failed="${failed}tests failed on the embedded store"$'\n'
if [ -n "${MONGODB_URI:-}" ]; then store_name="the store at MONGODB_URI"; else store_name="embedded store (FerretDB v1)"; fi
pkg_times "$store_name" "$json_dir/embedded.json"
count_tests "$store_name" "$json_dir/embedded.json"
if [ -n "$failed" ]; then printf '%s' "$times$failed"; exit 1; fi

echo "== fuzzing, a few seconds per target (minutes: FUZZTIME=2m ./scripts/test.sh; by default 500 inputs a target)"
for target in "tools FuzzDecode" "tools FuzzParseTime" "tools FuzzRender" "repo FuzzCheckFreeForm" "repo FuzzSearchText"; do
  set -- $target
  if ! out=$(go test ./"$1" -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-500x}" 2>&1); then
    echo "$out"; echo "$2 failed (the failing input is under $1/testdata/fuzz/$2)"; exit 1
  fi
  echo "$2: ok"
done

echo "== the whole suite again on a second engine (FerretDB v2 on PostgreSQL with DocumentDB)"
# The kit lives beside the project's clone; it installs from Debian's packages
# and its own prebuilt files (root only). Elsewhere this step says it skipped.
# Every package whose tests honour MONGODB_URI runs again against it: the
# ordered protocol without in-process serialisation, $unionWith, real indexes
# (the explain test) and the multi-process tests the embedded store cannot run.
# Tests of what no store decides (the MCP conformance suite) skip there: they
# ran above.
kit="$(pwd)/../shared/stores/documentdb"
if [ -x "$kit/install.sh" ] && [ "$(id -u)" = 0 ]; then
  ddb_dir="${DOCUMENTDB_HOME:-/var/tmp/outreach-documentdb}/test-run"
  ddb_uri=""
  if "$kit/install.sh" >/dev/null; then
    ddb_uri=$("$kit/start.sh" --port-pg 54391 --port-mongo 27091 --dir "$ddb_dir") || ddb_uri=""
  fi
  trap '"$kit/stop.sh" --dir "$ddb_dir" >/dev/null 2>&1 || true' EXIT
fi
if [ -n "${ddb_uri:-}" ]; then
  store_pkgs=$(go list -f '{{.Dir}} {{.ImportPath}}' ./... | while read -r dir pkg; do
    if grep -qE 'MONGODB_URI|testenv\.' "$dir"/*_test.go 2>/dev/null; then echo "$pkg"; fi
  done)
  echo "packages: $(echo $store_pkgs)"
  ddb_rc=0
  (export "$ddb_uri" OUTREACH_SECOND_STORE_PASS=1; gotestsum --format pkgname --jsonfile "$json_dir/documentdb.json" -- \
    -count=1 -timeout 60m -skip '^TestReplicaSet$' $store_pkgs) || ddb_rc=$?
  pkg_times "document engine" "$json_dir/documentdb.json"
  count_tests "document engine (FerretDB v2 + DocumentDB)" "$json_dir/documentdb.json"
  "$kit/stop.sh" --dir "$ddb_dir" >/dev/null 2>&1 || true
  trap - EXIT
  [ "$ddb_rc" = 0 ] || failed="${failed}tests failed on the document engine"$'\n'
elif [ -x "$kit/install.sh" ] && [ "$(id -u)" = 0 ]; then
  echo "skipped: the document engine could not be installed or started (its messages are above)"
  counts="${counts}document engine: skipped, it could not be installed or started"$'\n'
else
  echo "skipped: the document-engine kit (../shared/stores/documentdb) is not beside this clone, or this is not root"
  counts="${counts}document engine: skipped, its kit is not beside this clone (or not root)"$'\n'
fi

echo "== tests on a MongoDB replica set (testcontainers, needs a Docker engine)"
go test -count=1 -timeout 40m -run '^TestReplicaSet$' -v ./integration/ | grep -v '^=== RUN'

echo "== time"
printf '%s' "$times"
echo "whole command: $((SECONDS / 60))m$((SECONDS % 60))s"
echo "== counts"
printf '%s' "$counts"
if [ -n "$failed" ]; then printf '%s' "$failed"; exit 1; fi

