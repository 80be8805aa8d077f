#!/usr/bin/env bash
# The RPC pattern in tokio tasks (examples/rpc_tasks.rs), every timer in one
# process. Builds the example twice: as it is, and with
# RUSTFLAGS="--cfg tokio_unstable" into target/unstable, which adds the row
# for tokio's alternative timer; then runs the second build, passing on its
# arguments.
#
#   benches/rpc_tasks.sh                 # 40 rounds of 0.5 s, about 12 minutes
#   benches/rpc_tasks.sh --quick         # a few seconds: does it run
#   benches/rpc_tasks.sh --plain ...     # run the plain build (no alt-timer row)
#   benches/rpc_tasks.sh --tasks 8192 --deadline-ms 500 --rounds 20 --round-ms 500
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --example rpc_tasks --features tower
RUSTFLAGS="--cfg tokio_unstable" \
    cargo build --release --example rpc_tasks --features tower --target-dir target/unstable

if [[ "${1:-}" == "--plain" ]]; then
    shift
    exec target/release/examples/rpc_tasks "$@"
fi
exec target/unstable/release/examples/rpc_tasks "$@"
