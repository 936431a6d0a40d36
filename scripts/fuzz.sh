#!/usr/bin/env bash
# fuzz.sh: runs every native Go fuzz target of the module (func FuzzXxx(f
# *testing.F) in a _test.go file), one after another, each for $FUZZTIME
# (default 30s; `make test` runs it with 3s), and prints per package the time
# its build took and per target the time it fuzzed, the inputs it tried and
# its wall time. Targets are listed by the test binary (-test.list), so a new
# one runs without editing this file.
#
# A failing input fails the run; Go saves it under the package's
# testdata/fuzz/FuzzXxx/, and from then on plain `go test` replays it: fix the
# code and commit that file as the regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}

# Only packages with a Fuzz function are built: once each, as a test
# binary with the fuzzing instrumentation (go test -c -fuzz), which then
# lists its targets (-test.list) and runs each (-test.fuzz) from the
# package's directory, where its testdata/fuzz corpus is. One build per
# package, not one per target and one more to list them.
# -tags integration: a fuzz target in a *_integration_test.go file is run too.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . | xargs -r -n1 dirname | sort -u)
if ((${#dirs[@]} == 0)); then
	echo "fuzz: no fuzz targets"
	exit 0
fi
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
cache=$(go env GOCACHE)/fuzz

status=0 failed=0 targets=0
for dir in "${dirs[@]}"; do
	pkg=$(go list "$dir")
	bin=$bins/$(tr / _ <<<"$pkg").test
	start=$EPOCHREALTIME
	if ! out=$(go test -c -tags integration -fuzz . -o "$bin" "$dir" 2>&1); then
		printf 'fuzz: FAIL %s: build\n' "$pkg"
		sed 's/^/    /' <<<"$out" | tail -30
		status=1 failed=$((failed + 1))
		continue
	fi
	printf 'fuzz: built %s in %ss\n' "$pkg" "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
	mapfile -t names < <(cd "$dir" && "$bin" -test.list '^Fuzz' | grep -E '^Fuzz')
	for name in "${names[@]}"; do
		targets=$((targets + 1))
		start=$EPOCHREALTIME
		again=
		for try in 1 2; do
			# The flags go test gives a test binary it fuzzes: the same
			# corpus cache as `go test -fuzz`, and its default timeout.
			if out=$(cd "$dir" && "$bin" -test.paniconexit0 -test.timeout 10m -test.v -test.run '^$' \
				-test.fuzz "^${name}\$" -test.fuzztime "$FUZZTIME" -test.fuzzcachedir "$cache/$pkg" 2>&1); then
				result=PASS
				break
			fi
			result=FAIL
			# Go's fuzzing coordinator can end a run at its deadline with a bare
			# "context deadline exceeded" and no failing input (a race in the
			# toolchain, not a finding): run such a target once more. A real
			# finding always writes its input under testdata/fuzz.
			if [[ $try == 1 ]] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
				again=" (run twice: the first ended in the toolchain's deadline race)"
				continue
			fi
			break
		done
		if [[ $result == FAIL ]]; then
			status=1 failed=$((failed + 1))
		fi
		wall=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
		# how long it fuzzed ("--- PASS: FuzzX (3.01s)") and the fuzzer's last
		# count of inputs ("execs: 41234"; "?" when it ended before its first
		# progress line, which it prints every 3 s)
		ran=$(grep -oE -- "--- (PASS|FAIL): ${name} \([0-9.]+s\)" <<<"$out" | grep -oE '[0-9.]+s' | tail -1 || true)
		execs=$(grep -oE 'execs: [0-9]+' <<<"$out" | tail -1 | grep -oE '[0-9]+' || true)
		printf 'fuzz: %-4s %s %s: fuzzed %s, %s inputs; %ss wall%s\n' "$result" "$pkg" "$name" "${ran:-?}" "${execs:-?}" "$wall" "$again"
		if [[ $result == FAIL ]]; then
			sed 's/^/    /' <<<"$out" | tail -30
		fi
	done
done
echo "fuzz: $targets targets, $FUZZTIME each, $failed failed"
exit $status
