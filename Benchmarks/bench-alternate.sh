#!/bin/bash
# Before and after: `make bench`'s sections for the release build of an older commit and of the
# work tree, alternated (old, new, old, new, …), so both meet the same machine and minutes.
#
#   Benchmarks/bench-alternate.sh COMMIT [ROUNDS] [BENCH_ARGS…]
#   e.g. Benchmarks/bench-alternate.sh 3b7dfeb 2 --sections single,small,mirrors --runs 3
#
# The older commit is built in a worktree of its own (/tmp/bench-before-COMMIT, kept for the
# next run). Each run's output goes to /tmp/bench-{before,after}-N.txt; Benchmarks/RESULTS.md is
# left as it was (bench.py rewrites it on every run).
set -euo pipefail
commit=${1:?usage: bench-alternate.sh COMMIT [ROUNDS] [BENCH_ARGS...]}
shift
rounds=2
if [[ ${1:-} =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
root=$(cd "$(dirname "$0")/.." && pwd)
before=/tmp/bench-before-$commit
if [ ! -d "$before" ]; then git -C "$root" worktree add -q "$before" "$commit"; fi
for tree in "$before" "$root"; do
    for product in downloadsd downloadsctl downloads-file-helper; do
        (cd "$tree" && swift build -c release --product "$product" >/dev/null)
    done
done
cp "$root/Benchmarks/RESULTS.md" /tmp/bench-alternate-RESULTS.md
trap 'cp /tmp/bench-alternate-RESULTS.md "$root/Benchmarks/RESULTS.md"' EXIT
for round in $(seq 1 "$rounds"); do
    for which in before after; do
        tree=$root
        if [ "$which" = before ]; then tree=$before; fi
        echo "== round $round, $which ($(git -C "$tree" rev-parse --short HEAD)), $(date -u +%H:%M:%S) UTC"
        DOWNLOADSD_BENCH_BINARY=$tree/.build/release/downloadsd DOWNLOADSCTL_BENCH_BINARY=$tree/.build/release/downloadsctl \
            /usr/bin/python3 "$root/Benchmarks/bench.py" "$@" > "/tmp/bench-$which-$round.txt" 2>&1
    done
done
echo "outputs: /tmp/bench-before-N.txt and /tmp/bench-after-N.txt"
