//! One seeded random schedule per shape: 40 steps of creates, edits,
//! deletes and host restarts on three primaries of the shape (the steps
//! it meets), as fast as the API
//! server takes them, then every invariant of the matrix once the host has
//! caught up. The seed is `WASMCTRL_TEST_SEED` or `PROPTEST_RNG_SEED` if
//! set, a fixed one under `CI=true`, else fresh; it is printed first and
//! again if the test fails, and rerunning with it replays the schedule
//! (the host's timing still varies).

use std::time::Duration;

use super::{Lab, Shape, Step};

/// Steps in the schedule.
const STEPS: usize = 40;
/// The seed under CI when none is given.
const CI_SEED: u64 = 21;
const NAMES: [&str; 3] = ["a", "b", "c"];

/// splitmix64: small, seedable, good enough to pick steps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn seed() -> u64 {
    for var in ["WASMCTRL_TEST_SEED", "PROPTEST_RNG_SEED"] {
        if let Some(seed) = std::env::var(var).ok().and_then(|s| s.trim().parse().ok()) {
            return seed;
        }
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        return CI_SEED;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(CI_SEED, |d| d.as_nanos() as u64)
}

/// Prints the seed again when the test fails.
struct SeedOnFailure(u64);

impl Drop for SeedOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "random schedule failed with seed {0}: rerun with WASMCTRL_TEST_SEED={0}",
                self.0
            );
        }
    }
}

/// The next step for `lab`: a create for a gone Widget, something done to
/// a live one, or now and then a restart.
fn pick(rng: &mut Rng, lab: &Lab) -> Step {
    if rng.below(10) == 0 {
        return Step::Restart;
    }
    let name = NAMES[rng.below(NAMES.len() as u64) as usize];
    if !lab.alive(name) {
        return Step::Create(name);
    }
    let step = match rng.below(8) {
        0 => Step::EditSpec(name),
        1 => Step::EditLabels(name),
        2 => Step::ForeignStatus(name),
        3 => Step::EditOutput(name),
        4 => Step::DeleteOutput(name),
        5 => Step::RestartMidDeletion(name),
        _ => Step::Delete(name),
    };
    // A step the shape never meets (no status on a ConfigMap primary, no
    // output a person can delete apart) is the nearest one it does: the
    // same draws, so a shape meeting every step (the child) keeps its
    // schedules.
    let meets = |s: &Step| {
        lab.shape
            .steps()
            .iter()
            .any(|m| std::mem::discriminant(m) == std::mem::discriminant(s))
    };
    match step {
        Step::ForeignStatus(_) if !meets(&step) => Step::EditSpec(name),
        Step::DeleteOutput(_) if !meets(&step) => Step::Delete(name),
        step => step,
    }
}

/// Until the host has been idle (its queues empty) for longer than
/// [`wasmctrl::guard::ContestConfig`]'s default `react`.
async fn person_waits(lab: &Lab) {
    let react = wasmctrl::guard::ContestConfig::default().react;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut quiet_since = None;
    while tokio::time::Instant::now() < deadline {
        match (lab.idle(), quiet_since) {
            (false, _) => quiet_since = None,
            (true, None) => quiet_since = Some(tokio::time::Instant::now()),
            (true, Some(t)) if t.elapsed() > react + Duration::from_millis(200) => return,
            (true, Some(_)) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn schedule(shape: Shape) {
    let seed = seed();
    let name = shape.name();
    eprintln!("{name}: random schedule seed {seed} (rerun with WASMCTRL_TEST_SEED={seed})");
    let _guard = SeedOnFailure(seed);
    let mut rng = Rng(seed);
    let mut lab = Lab::new(shape).await;
    let mut steps = Vec::with_capacity(STEPS);
    for _ in 0..STEPS {
        let step = pick(&mut rng, &lab);
        steps.push(step);
        if matches!(step, Step::EditOutput(_) | Step::DeleteOutput(_)) {
            // A person, not a rival: never within `react` (1 s) of the
            // host's last write, or the write-war rules would rightly see
            // three quick take-backs of one output as a war.
            person_waits(&lab).await;
        }
        lab.act(step).await;
        tokio::time::sleep(Duration::from_millis(rng.below(60))).await;
    }
    eprintln!("{name}: random schedule {seed}: {steps:?}");
    // Caught up: converged; then quiet over two more resyncs.
    lab.settle(Step::Resync, lab.counters()).await;
    lab.step(Step::Resync).await;
    lab.stop_host().await;
}
