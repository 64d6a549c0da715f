#!/usr/bin/env bash
# Compares the write-path figures of two commits in one run, alternating between them so that the machine's
# noise falls on both alike: append at 1,000- and 10,000-row calls, upsert at 10% updates, Apply's interleaved
# change stream (its CPU per million changes reads the same under load), copy-on-write MB/s (4 MB files, zstd
# level 1) and peak RSS writing 10M rows.
#
#   scripts/bench-compare.sh OLD [NEW] [ROUNDS]    (NEW defaults to the working tree, ROUNDS to 3)
#
# OLD is checked out in a temporary worktree. Prints benchstat's table (golang.org/x/perf) of both.
set -euo pipefail
old=${1:?usage: scripts/bench-compare.sh OLD [NEW] [ROUNDS]}
new=${2:-}
rounds=${3:-3}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; [ -n "$new" ] && git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/old" "$old" >/dev/null
newdir=$root
if [ -n "$new" ]; then
	git -C "$root" worktree add --detach "$work/new" "$new" >/dev/null
	newdir=$work/new
fi
# One pattern per go test run: sub-benchmark patterns apply to every benchmark a run matches.
benches=('^Benchmark(WriterAppend|Upsert10pct|PeakRSS|Apply)$' '^BenchmarkCopyOnWriteThroughput$/^file=4MB$/^zstd=1$')
for i in $(seq "$rounds"); do
	for side in old new; do
		dir=$work/old
		[ "$side" = new ] && dir=$newdir
		echo "round $i/$rounds: $side" >&2
		for bench in "${benches[@]}"; do
			(cd "$dir" && go test -run '^$' -bench "$bench" -benchtime 1x -count 1 -timeout 60m .) >>"$work/$side.txt"
		done
	done
done
cp "$work/old.txt" "$work/new.txt" "${TMPDIR:-/tmp}/" 2>/dev/null || true
go run golang.org/x/perf/cmd/benchstat@latest "$work/old.txt" "$work/new.txt"
