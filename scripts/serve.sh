#!/usr/bin/env bash
# Builds ./bin/outreach and runs `outreach serve` in this process's place, so
# Ctrl-C and SIGTERM reach the server itself: it finishes the calls in flight,
# releases the data directory's lock and exits, leaving nothing running.
#
#   ./scripts/serve.sh                 # serve on 127.0.0.1:8080, data in ./data
#   ./scripts/serve.sh --demo          # the same, with the demo data on an empty store
#   ./scripts/serve.sh --addr :9000    # any flag of `outreach serve`
#
# OUTREACH_BIN names another place for the binary (default ./bin/outreach).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${OUTREACH_BIN:-./bin/outreach}"
mkdir -p "$(dirname "$bin")"

total=$(go list -deps ./cmd/outreach 2>/dev/null | wc -l || echo "?")
if [ -x "$bin" ]; then
	echo "building $bin (only what changed)…" >&2
else
	echo "building $bin: the first build compiles $total packages, downloading the modules it lacks. From a fresh" >&2
	echo "clone with empty Go caches, serving took 68 s on 2 idle cores and 225 s on 2 busy ones (load 8): see" >&2
	echo "docs/clients.md, 'A newcomer's first minutes'. Later builds take seconds. One line per compiled package:" >&2
fi
# go build -v names every package it compiles, as it compiles it.
go build -v -o "$bin" ./cmd/outreach 2>&1 | {
	n=0
	while IFS= read -r line; do
		case "$line" in
		"go: "* | "#"* | *.go:*) printf '%s\n' "$line" ;;
		*) n=$((n + 1)); printf '  [%3d/%s] %s\n' "$n" "$total" "$line" ;;
		esac
	done
} >&2
echo "starting $bin serve $*" >&2
exec "$bin" serve "$@"
