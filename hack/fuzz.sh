#!/usr/bin/env bash
# make fuzz: run every fuzz target in the module for FUZZTIME each (Go's
# fuzzer runs one target per invocation). `make test` runs their seed
# corpora (f.Add and testdata/fuzz) as ordinary tests. A crash leaves its
# input in the package's testdata/fuzz/<Target>/: commit it with the fix,
# and it becomes a seed.
set -euo pipefail
fuzztime=${1:-1m}
go=${GO:-go}
failed=0
for pkg in $($go list ./...); do
	targets=$($go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		printf 'fuzz: %s %s for %s\n' "$pkg" "$t" "$fuzztime"
		log=$(mktemp)
		if $go test "$pkg" -run '^$' -fuzz "^$t\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
			tail -n 2 "$log"
		else
			cat "$log"
			failed=1
		fi
		rm -f "$log"
	done
done
exit $failed
