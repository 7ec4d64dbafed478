#!/usr/bin/env bash
# make verify: the checks every change passes before tests run. Each rule
# prints what breaks it; the script fails if any rule does.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
STATICCHECK=${STATICCHECK:?set by the Makefile}
MAX_FILE_BYTES=$((1 << 20))
failed=()

rule() { echo "verify: $1"; }
fail() { failed+=("$1"); }

rule "gofmt"
unformatted=$(find . -name '*.go' -not -path './bin/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [[ -n $unformatted ]]; then
	echo "$unformatted" | sed 's/^/  not gofmt-ed: /'
	fail gofmt
fi

rule "go vet (with and without the integration tag)"
$GO vet ./... || fail "go vet"
$GO vet -tags integration ./... || fail "go vet -tags integration"

rule "go mod tidy"
if ! diff=$($GO mod tidy -diff 2>&1); then
	echo "$diff" | sed 's/^/  /'
	fail "go mod tidy (run it and commit go.mod/go.sum)"
fi

rule "the test/mixin module: vet and tidy"
(cd test/mixin && $GO vet ./... && $GO mod tidy -diff) || fail "test/mixin (vet, or go mod tidy there)"

rule "staticcheck"
$STATICCHECK -tags integration ./... || fail staticcheck

rule "no tracked file over 1 MiB"
big=$(git ls-files -z | xargs -0 stat -c '%s %n' 2>/dev/null | awk -v max=$MAX_FILE_BYTES '$1 > max {print "  " $2 " (" $1 " bytes)"}')
if [[ -n $big ]]; then
	echo "$big"
	fail "tracked files over 1 MiB (build outputs belong in bin/, ignored)"
fi

rule "import boundaries"
# The operator CLI links the local-API client and CRI code, never the test
# suites or the agent's insides.
bad=$($GO list -deps ./cmd/nodectl | grep -E '^nodeagent/(test|agent)(/|$)')
if [[ -n $bad ]]; then
	echo "$bad" | sed 's/^/  nodectl links /'
	fail "nodectl links test/ or agent/ packages"
fi
# Core packages are used by the agent, never the other way round.
core_bad=0
for pkg in $($GO list ./api/... ./manifest/... ./cgroups/... ./cri/... ./eviction/... ./probes/... ./network/... ./internal/...); do
	if $GO list -deps "$pkg" | grep -qE '^nodeagent/agent(/|$)'; then
		echo "  $pkg imports nodeagent/agent"
		core_bad=1
	fi
done
((core_bad)) && fail "a core package imports agent/"

rule "the root directory's layout is spelled in internal/layout only"
# Packages that write, measure and clean up a pod's files must agree on
# where they are: they ask internal/layout (tests spell paths to check it).
layout_bad=$(git grep --untracked -nE 'filepath\.Join\([^)]*"(pods|volumes|volume-subpaths|etc-hosts|containers|seccomp|device-plugins)"|"kubernetes\.io~' -- '*.go' ':!*_test.go' ':!internal/layout/' ':!test/')
if [[ -n $layout_bad ]]; then
	echo "$layout_bad" | sed 's/^/  /'
	fail "a path of the root directory's layout spelled outside internal/layout"
fi

rule "no file of the agent over 500 lines"
# A file that grows past this holds more than one thing: split it by concept.
long=$(git ls-files --cached --others --exclude-standard 'agent/*.go' | grep -v '_test\.go$' | xargs wc -l | awk '$2 != "total" && $1 > 500 {print "  " $2 " (" $1 " lines)"}')
if [[ -n $long ]]; then
	echo "$long"
	fail "agent files over 500 lines"
fi

rule "every documented flag exists, and every flag of nodeagent is documented"
# The flag lists in docs/ are what operators copy into unit files: a flag
# renamed or dropped in the code must not live on there.
bins=$(mktemp -d)
if $GO build -o "$bins/nodeagent" ./cmd/nodeagent && $GO build -o "$bins/nodectl" ./cmd/nodectl; then
	agent_flags=$("$bins/nodeagent" --help 2>&1 | sed -nE 's/^  -([a-z0-9-]+).*/\1/p' | sort -u)
	agent_doc=$({ sed -n '/^Flags that are not part/,/^## /p' docs/configuration.md; sed -n '/^## Flags and fields/,/^## /p' docs/cluster.md; } |
		grep -oE '`--[a-z0-9-]+' | sed 's/^`--//' | sort -u)
	flags_bad=$( {
		comm -13 <(echo "$agent_flags") <(echo "$agent_doc") | sed 's/^/  documented but not a nodeagent flag: --/'
		comm -23 <(echo "$agent_flags") <(echo "$agent_doc") | sed 's#^#  nodeagent flag not in docs/configuration.md or docs/cluster.md: --#'
		ctl_flags=$(for c in "" $("$bins/nodectl" --help | sed -n '/^Available Commands:/,/^$/p' | awk 'NR>1 && NF {print $1}'); do
			"$bins/nodectl" $c --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]+'
		done | sort -u)
		comm -13 <(echo "$ctl_flags") <(grep -ohE -- '--[a-z][a-z0-9-]+' docs/nodectl.md | sort -u) | sed 's#^#  docs/nodectl.md names a flag nodectl lacks: #'
	} )
	if [[ -n $flags_bad ]]; then
		echo "$flags_bad"
		fail "documented flags"
	fi
else
	fail "build nodeagent and nodectl for the flag check"
fi
rm -rf "$bins"

if ((${#failed[@]})); then
	printf 'verify failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "verify: all rules pass"
