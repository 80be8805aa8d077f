//! Model check with proptest: random operation sequences against a
//! manual-clock timer and a reference model (see `support/model.rs`).

#[path = "support/model.rs"]
mod model;

use model::{check, Op};
use proptest::prelude::*;

fn ops(tick: u64, wheel: u64) -> impl Strategy<Value = Vec<Op>> {
    let turn = tick * wheel;
    let delay = prop_oneof![
        Just(0u64),
        0..tick * 3,
        (0..wheel * 4).prop_map(move |t| t * tick), // exact tick boundaries
        0..turn * 5,                                // several wheel turns
        Just(u64::MAX),
    ];
    let op = prop_oneof![
        5 => delay.clone().prop_map(Op::Schedule),
        1 => delay.clone().prop_map(Op::ScheduleAt),
        3 => any::<usize>().prop_map(Op::Cancel),
        3 => (any::<usize>(), delay).prop_map(|(n, d)| Op::Reset(n, d)),
        4 => prop_oneof![0..tick * 2, 0..turn * 2, Just(tick)].prop_map(Op::Advance),
        1 => Just(Op::Stop),
    ];
    prop::collection::vec(op, 1..60)
}

const CASES: u32 = if cfg!(miri) { 8 } else { 512 };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn small_wheel_many_turns(ops in ops(10, 4)) {
        check(10, 4, ops).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn default_wheel(ops in ops(1_000_000, 512)) {
        check(1_000_000, 512, ops).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn odd_tick(ops in ops(7, 8)) {
        check(7, 8, ops).map_err(TestCaseError::fail)?;
    }
}
