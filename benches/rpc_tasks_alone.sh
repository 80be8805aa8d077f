#!/usr/bin/env bash
# Whole processes of examples/rpc_tasks, one row each (`--alone`), the rows
# taken in turn, RUNS times; prints each row's median and range of CPU
# seconds (user + system) and context switches. Rows of one call do the
# same number of requests, so their CPU compares directly; the baseline's
# (no timeout) is the floor to subtract.
#
#   benches/rpc_tasks_alone.sh 5 4 "baseline: rx.await, no timeout" "tokio::time::timeout" "hashed_wheel_timer timeout"
#   EXTRA=--tokio-clock benches/rpc_tasks_alone.sh 5 4 ...   # the crate's rows on tokio_clock()
set -euo pipefail
cd "$(dirname "$0")/.."
runs=$1 rounds=$2
shift 2
RUSTFLAGS="--cfg tokio_unstable" \
    cargo build --release --example rpc_tasks --features tower --target-dir target/unstable 2>/dev/null
out=$(mktemp)
for _ in $(seq "$runs"); do
    for row in "$@"; do
        line=$(target/unstable/release/examples/rpc_tasks --rounds "$rounds" ${EXTRA:-} --alone "$row" 2>/dev/null | tail -1)
        echo "$row|$(echo "$line" | sed -E 's/.* ([0-9.]+) CPU s, ([0-9]+) context.*/\1|\2/')" >>"$out"
    done
done
python3 - "$out" "$@" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    row, cpu, switches = line.rstrip("\n").rsplit("|", 2)
    rows.setdefault(row, []).append((float(cpu), int(switches)))
print(f"| row | CPU s, median | range | context switches, median | runs |")
print("|---|---:|---:|---:|---:|")
for row in sys.argv[2:]:
    cpu = sorted(c for c, _ in rows[row])
    sw = sorted(s for _, s in rows[row])
    print(f"| {row} | {statistics.median(cpu):.3f} | {cpu[0]:.3f} to {cpu[-1]:.3f} | {statistics.median(sw):.0f} | {len(cpu)} |")
PY
rm -f "$out"
