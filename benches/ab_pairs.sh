#!/usr/bin/env bash
# Two builds of examples/rpc_tasks against each other, whole processes taken
# in turn (A B A B ...), PAIRS pairs: the CPU seconds of each (user + system,
# the "whole process" figure of `--alone`), and the median and range of the
# per-pair ratio B / A (under 1: B is cheaper). Pairs taken in turn share the
# machine's noise, which one figure each would not.
#
#   benches/ab_pairs.sh 12 /tmp/base/rpc_tasks target/unstable/release/examples/rpc_tasks \
#       --rounds 4 --tokio-clock --alone "hashed_wheel_timer timeout"
#
# Build each side with RUSTFLAGS="--cfg tokio_unstable" cargo build --release
# --example rpc_tasks --features tower (the base from a `git worktree` of its
# commit, with a CARGO_TARGET_DIR of its own).
set -euo pipefail
pairs=$1 a=$2 b=$3
shift 3
cpu() { "$@" 2>/dev/null | tail -1 | sed -nE 's/.*whole process ([0-9.]+) CPU s.*/\1/p'; }
for _ in $(seq "$pairs"); do
    echo "$(cpu "$a" "$@") $(cpu "$b" "$@")"
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin if len(line.split()) == 2]
for a, b in rows:
    print(f"A {a:.3f}  B {b:.3f}  B/A {b / a:.3f}")
ratios = sorted(b / a for a, b in rows)
print(f"per-pair B/A: median {statistics.median(ratios):.3f}, range {ratios[0]:.3f}-{ratios[-1]:.3f}, {len(ratios)} pairs")'
