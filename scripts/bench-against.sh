#!/usr/bin/env bash
# Runs one benchmark on this checkout and on an earlier commit, alternately, in the same minutes: the baseline
# "the previous commit in a worktree" of docs/benchmarks.md, on a machine whose load moves. The benchmark's
# file is copied into a temporary worktree of the earlier commit, so it must use only what that commit has.
#
#   scripts/bench-against.sh REV FILE BENCHMARK [ROUNDS] [BENCHTIME]
#   e.g. scripts/bench-against.sh f06c358 bench_upsertrate_test.go BenchmarkUpsertRate 5 6x
#
# Prints each round's two result lines, "old" (REV) then "new" (this checkout, uncommitted changes included).
set -euo pipefail
if [[ $# -lt 3 ]]; then
	sed -n '2,9p' "$0" >&2
	exit 2
fi
cd "$(dirname "$0")/.."
rev=$1 file=$2 bench=$3 rounds=${4:-5} benchtime=${5:-1x}
pkg=$(dirname "$file")
work=$(mktemp -d /tmp/bench-against.XXXXXX)
cleanup() {
	git worktree remove --force "$work/old" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
git worktree add -q --detach "$work/old" "$rev"
cp "$file" "$work/old/$pkg/"
(cd "$work/old" && go test -c -o "$work/old.test" "./$pkg")
go test -c -o "$work/new.test" "./$pkg"
for _ in $(seq "$rounds"); do
	for side in old new; do
		dir=$pkg
		[[ $side == old ]] && dir=$work/old/$pkg
		printf '%s\t' "$side"
		(cd "$dir" && "$work/$side.test" -test.run '^$' -test.bench "^$bench\$" -test.benchtime "$benchtime") |
			grep '^Benchmark'
	done
done
