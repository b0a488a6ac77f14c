#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: it installs what the
# tests need (Go modules, the npm clients of the end-to-end tests), validates
# docker-compose.yml where docker-compose exists, then runs vet and the whole
# Go test suite (with a replica-set run through testcontainers when a Docker
# engine is reachable). MONGODB_URI, when set, runs the same tests
# against that MongoDB as well as the embedded store's defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go modules"
go mod download

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

echo "== docker-compose.yml"
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Debian's docker-compose validates the file; no Docker engine is needed for that.
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose) >/dev/null 2>&1 \
    || echo "could not install docker-compose"
fi
if command -v docker-compose >/dev/null 2>&1; then
  docker-compose -f docker-compose.yml config -q && echo "valid"
elif docker compose version >/dev/null 2>&1; then
  docker compose -f docker-compose.yml config -q && echo "valid"
else
  echo "docker-compose is not installed: docker-compose.yml not validated (skipped)"
fi

echo "== tests"
go test -count=1 -timeout 40m -skip '^TestReplicaSet$' ./...

echo "== fuzzing, a few seconds per target (minutes: FUZZTIME=2m ./scripts/test.sh)"
for target in "tools FuzzDecode" "tools FuzzParseTime" "tools FuzzRender" "repo FuzzCheckFreeForm" "repo FuzzSearchText"; do
  set -- $target
  if ! out=$(go test ./"$1" -run '^$' -fuzz "^$2\$" -fuzztime "${FUZZTIME:-5s}" 2>&1); then
    echo "$out"; echo "$2 failed (the failing input is under $1/testdata/fuzz/$2)"; exit 1
  fi
  echo "$2: ok"
done

echo "== tests on a MongoDB replica set (testcontainers, needs a Docker engine)"
go test -count=1 -timeout 40m -run '^TestReplicaSet$' -v ./integration/ | grep -v '^=== RUN'

