#!/usr/bin/env bash
# Whole processes of examples/rpc_tasks, one row each (`--alone`), the rows
# taken in turn, RUNS times; prints each row's median and range of CPU
# seconds (user + system), context switches, the responder thread's CPU
# (the same code in every row) and the rest of the process. Rows of one
# call do the same number of requests, so their CPU compares directly; the
# baseline's (no timeout) is the floor to subtract.
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
        echo "$row|$(echo "$line" | sed -E 's/.* ([0-9.]+) CPU s, ([0-9]+) context.* ([0-9.]+) CPU s$/\1|\2|\3/')" >>"$out"
    done
done
python3 - "$out" "$@" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    row, cpu, switches, responder = line.rstrip("\n").rsplit("|", 3)
    rows.setdefault(row, []).append((float(cpu), int(switches), float(responder)))
print(f"| row | CPU s, median | range | context switches, median | responder thread CPU s, median (range) | the rest, median (range) | runs |")
print("|---|---:|---:|---:|---:|---:|---:|")
for row in sys.argv[2:]:
    cpu = sorted(r[0] for r in rows[row])
    sw = sorted(r[1] for r in rows[row])
    resp = sorted(r[2] for r in rows[row])
    rest = sorted(r[0] - r[2] for r in rows[row])
    print(f"| {row} | {statistics.median(cpu):.3f} | {cpu[0]:.3f} to {cpu[-1]:.3f} | {statistics.median(sw):.0f} "
          f"| {statistics.median(resp):.3f} ({resp[0]:.3f}-{resp[-1]:.3f}) | {statistics.median(rest):.3f} ({rest[0]:.3f}-{rest[-1]:.3f}) | {len(cpu)} |")
PY
rm -f "$out"
