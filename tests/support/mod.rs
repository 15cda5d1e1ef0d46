pub mod trace_rows;

/// The property tests' configuration: `cases` cases from a fixed seed, so CI runs the same cases
/// every time (PROPTEST_RNG_SEED does not override a fixed seed; change it here to explore).
#[allow(
    dead_code,
    reason = "not every test binary that includes `support` has property tests"
)]
pub fn fixed_cases(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20261123),
        ..proptest::test_runner::Config::default()
    }
}
