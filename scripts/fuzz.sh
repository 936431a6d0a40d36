#!/usr/bin/env bash
# fuzz.sh: runs every native Go fuzz target of the module (func FuzzXxx(f
# *testing.F) in a _test.go file) for FUZZTIME each (default 30s; `make test`
# uses a short time, `make fuzz` the default or FUZZTIME=5m). Prints one line
# per target with how long it ran and how many inputs it tried. A crash
# leaves its input under the package's testdata/fuzz/FuzzXxx/, where plain
# `go test` replays it from then on: turn it into a regression test.
# Usage: scripts/fuzz.sh [package-dir-pattern]   e.g. scripts/fuzz.sh internal/decode
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .stack
fuzztime=${FUZZTIME:-30s}
filter=${1:-}
status=0
while read -r file fn; do
	dir=$(dirname "$file")
	[[ -n $filter && $dir != *"$filter"* ]] && continue
	log=.stack/fuzz-$fn.log
	start=$(date +%s)
	if go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "$dir" >"$log" 2>&1; then
		res=ok
	else
		res=FAIL
		status=1
	fi
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 || true)
	echo "fuzz: $fn ($dir) $res after $(($(date +%s) - start))s (fuzztime $fuzztime, ${execs:-execs: ?})"
	[[ $res == ok ]] || tail -20 "$log"
done < <(grep -rHoE --include='*_test.go' --exclude-dir=.cache --exclude-dir=.stack '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's/^\.\/(.*):func (Fuzz[A-Za-z0-9_]+).*/.\/\1 \2/' | sort)
exit $status
