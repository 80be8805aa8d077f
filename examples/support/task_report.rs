//! The table `rpc_tasks` prints: per request, each row less the baseline
//! of the same round, median and range over the rounds, and the noise
//! control (the two `tokio::time` rows must agree within 0.8-1.25).

use std::time::Instant;

use crate::proc::Usage;

/// Per request over one phase: CPU ns, context switches, and the rate.
#[derive(Clone, Copy, Default)]
pub struct Phase {
    cpu_ns: f64,
    switches: f64,
    per_sec: f64,
}

impl Phase {
    pub fn between(from: (Usage, u64, Instant), to: (Usage, u64, Instant)) -> Phase {
        let requests = to.1.saturating_sub(from.1).max(1) as f64;
        Phase {
            cpu_ns: (to.0.cpu - from.0.cpu) * 1e9 / requests,
            switches: to.0.switches.saturating_sub(from.0.switches) as f64 / requests,
            per_sec: requests / (to.2 - from.2).as_secs_f64(),
        }
    }

    fn minus(self, base: Phase) -> Phase {
        Phase {
            cpu_ns: self.cpu_ns - base.cpu_ns,
            switches: self.switches - base.switches,
            per_sec: self.per_sec,
        }
    }
}

/// One round of one row: the load phase, and the whole run with the drain.
#[derive(Clone, Copy, Default)]
pub struct Sample {
    pub load: Phase,
    pub whole: Phase,
}

/// Median, min and max.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = (values[(n - 1) / 2] + values[n / 2]) / 2.0;
    (median, values[0], values[values.len() - 1])
}

/// Picks one phase of a sample.
type PhaseOf = fn(&Sample) -> Phase;

pub fn report<P>(rows: &[(P, &str)], samples: &[Vec<Sample>], rounds: usize) {
    let baseline = &samples[0];
    let phases: [(&str, PhaseOf); 2] = [
        ("load phase", |s| s.load),
        ("whole run, drain included", |s| s.whole),
    ];
    let mut tokio_agreement = Vec::new();
    for (title, phase) in phases {
        // Each row less the baseline of the same round.
        let medians: Vec<(f64, f64, f64, f64, f64)> = samples
            .iter()
            .enumerate()
            .map(|(row, runs)| {
                let over = |r: usize| {
                    let p = phase(&runs[r]);
                    if row == 0 {
                        p
                    } else {
                        p.minus(phase(&baseline[r]))
                    }
                };
                let (cpu, low, high) = spread((0..rounds).map(|r| over(r).cpu_ns).collect());
                let (switches, ..) = spread((0..rounds).map(|r| over(r).switches).collect());
                let (per_sec, ..) = spread((0..rounds).map(|r| over(r).per_sec).collect());
                (cpu, low, high, switches, per_sec)
            })
            .collect();
        let tokio = medians[1].0;
        println!();
        println!("{title}, {rounds} rounds: per request, whole-process, less the baseline (the baseline's own row is absolute)");
        println!("| row | CPU ns, median | CPU ns, range | context switches | requests/s | vs tokio::time |");
        println!("|---|---:|---:|---:|---:|---:|");
        for (row, ((_, name), (cpu, low, high, switches, per_sec))) in
            rows.iter().zip(&medians).enumerate()
        {
            // A row within noise of the baseline has no meaningful ratio.
            let ratio = if row == 0 {
                String::new()
            } else if tokio > 0.0 && *cpu > 0.0 {
                format!("{:.2}x", tokio / cpu)
            } else {
                "n/a".to_owned()
            };
            println!(
                "| {name} | {cpu:.0} | {low:.0} to {high:.0} | {switches:.3} | {per_sec:.0} | {ratio} |"
            );
        }
        tokio_agreement.push((title, medians[1].0 / medians[2].0));
    }
    println!();
    let agree = tokio_agreement
        .iter()
        .all(|&(_, r)| (0.8..=1.25).contains(&r));
    let ratios: Vec<String> = tokio_agreement
        .iter()
        .map(|(title, r)| format!("{title} {r:.2}"))
        .collect();
    println!(
        "noise control: tokio::time run 1 / run 2 = {} -> {}",
        ratios.join(", "),
        if agree {
            "agree within 0.8-1.25: this run may be reported"
        } else {
            "DISAGREE (outside 0.8-1.25): the machine was too noisy, do not report this run"
        }
    );
}
