#!/usr/bin/env bash
# fuzz.sh: runs every native Go fuzz target of the module (func FuzzXxx(f
# *testing.F) in a _test.go file), one after another, each for $FUZZTIME
# (default 30s; `make test` runs it with 3s), and prints per target the time
# it fuzzed, the inputs it tried and the wall time with the build. Targets are
# found by `go test -list`, so a new one runs without editing this file.
#
# A failing input fails the run; Go saves it under the package's
# testdata/fuzz/FuzzXxx/, and from then on plain `go test` replays it: fix the
# code and commit that file as the regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}

# Only packages with a Fuzz function are listed (go test -list builds each
# test binary); -list then says exactly which targets they declare.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . | xargs -r -n1 dirname | sort -u)
if ((${#dirs[@]} == 0)); then
	echo "fuzz: no fuzz targets"
	exit 0
fi
# go test -list prints a package's matching names, then "ok <package> <time>".
# -tags integration: a fuzz target in a *_integration_test.go file is listed too.
mapfile -t targets < <(go test -tags integration -list '^Fuzz' "${dirs[@]}" |
	awk '/^Fuzz/ { names[n++] = $1; next } /^ok / { for (i = 0; i < n; i++) print $2, names[i]; n = 0 }')

status=0 failed=0
for t in "${targets[@]}"; do
	pkg=${t% *} name=${t#* }
	start=$EPOCHREALTIME
	again=
	for try in 1 2; do
		if out=$(go test -tags integration -v -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1); then
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
	printf 'fuzz: %-4s %s %s: fuzzed %s, %s inputs; %ss with the build%s\n' "$result" "$pkg" "$name" "${ran:-?}" "${execs:-?}" "$wall" "$again"
	if [[ $result == FAIL ]]; then
		sed 's/^/    /' <<<"$out" | tail -30
	fi
done
echo "fuzz: ${#targets[@]} targets, $FUZZTIME each, $failed failed"
exit $status
