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
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 256 {
        let op = match u.int_in_range(0u8..=15).unwrap_or(0) {
            0..=5 => Op::Schedule(match u.int_in_range(0u8..=4).unwrap_or(0) {
                0 => 0,
                1 => u.int_in_range(0..=tick * 3).unwrap_or(0),
                2 => u.int_in_range(0..=wheel as u64 * 4).unwrap_or(0) * tick,
                3 => u.int_in_range(0..=turn * 5).unwrap_or(0),
                _ => u64::MAX,
            }),
            6..=9 => Op::Cancel(u.arbitrary().unwrap_or(0)),
            10..=14 => Op::Advance(match u.int_in_range(0u8..=2).unwrap_or(0) {
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
