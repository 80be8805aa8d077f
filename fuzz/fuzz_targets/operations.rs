//! Fuzzes operation sequences against the reference model shared with
//! `tests/model.rs`.
//!
//!     cargo +nightly fuzz run operations -- -max_total_time=600
#![no_main]

#[path = "../../tests/support/model.rs"]
mod model;

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use model::Op;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(&(tick, wheel)) = u.choose(&[(10u64, 4usize), (7, 8), (1_000_000, 512)]) else {
        return;
    };
    let turn = tick * wheel as u64;
    // A delay (or a deadline from now): zero, within a few ticks, on a tick, within a few turns, or
    // the end of time.
    let delay = |u: &mut Unstructured| match u.int_in_range(0u8..=4).unwrap_or(0) {
        0 => 0,
        1 => u.int_in_range(0..=tick * 3).unwrap_or(0),
        2 => u.int_in_range(0..=wheel as u64 * 4).unwrap_or(0) * tick,
        3 => u.int_in_range(0..=turn * 5).unwrap_or(0),
        _ => u64::MAX,
    };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 256 {
        // The weights of `tests/model.rs`'s strategy: 5, 1, 3, 3, 4, 1.
        let op = match u.int_in_range(0u8..=16).unwrap_or(0) {
            0..=4 => Op::Schedule(delay(&mut u)),
            5 => Op::ScheduleAt(delay(&mut u)),
            6..=8 => Op::Cancel(u.arbitrary().unwrap_or(0)),
            9..=11 => Op::Reset(u.arbitrary().unwrap_or(0), delay(&mut u)),
            12..=15 => Op::Advance(match u.int_in_range(0u8..=2).unwrap_or(0) {
                0 => u.int_in_range(0..=tick * 2).unwrap_or(0),
                1 => u.int_in_range(0..=turn * 2).unwrap_or(0),
                _ => tick,
            }),
            _ => Op::Stop,
        };
        ops.push(op);
    }
    if let Err(failure) = model::check(tick, wheel, ops) {
        panic!("model check failed: {failure}");
    }
});
