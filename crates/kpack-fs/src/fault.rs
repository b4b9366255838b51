//! The crash-test hook.

/// The environment variable naming the point at which [`fault_point`] kills the process.
pub const FAULT_ENV: &str = "KPACK_TEST_KILL_AT";

/// A test hook: when the environment variable [`FAULT_ENV`] names `point`, the process kills
/// itself here (`SIGKILL` on Unix; `TerminateProcess` with exit status 137 on Windows), so crash tests can stop the real `kpack` binary at a chosen step of
/// writing its outputs and check what is left. The points: `stage-created` (a job's first
/// staging directory exists, nothing written), `atomic-written` (a temporary file is written,
/// not renamed), `before-publish` (every output of a job staged, none published),
/// `publish-partial` (the first of several outputs published), and those the commands name
/// themselves (`transform-host-written`).
///
/// `<point>` kills at the first time the point is reached, `<point>:<n>` at the `n`-th: a
/// command that runs jobs inside a job (`split-wheel` transforms each fat binary through its
/// own stage, then publishes the wheels through another) reaches a point several times, and
/// a test walks `n` up until the run completes to kill it at every one.
///
/// The variable is read once; unset (as it always is outside tests) this costs a load.
pub fn fault_point(point: &str) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static TARGET: std::sync::OnceLock<Option<(String, usize)>> = std::sync::OnceLock::new();
    static REACHED: AtomicUsize = AtomicUsize::new(0);
    let target = TARGET.get_or_init(|| std::env::var(FAULT_ENV).ok().map(|v| parse_target(&v)));
    let Some((name, nth)) = target else {
        return;
    };
    if name == point && REACHED.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
        crate::sys::kill_self();
    }
}

/// `point` or `point:n` as the point's name and the occurrence to kill at.
fn parse_target(value: &str) -> (String, usize) {
    match value.rsplit_once(':').map(|(name, n)| (name, n.parse())) {
        Some((name, Ok(nth))) => (name.to_owned(), nth),
        _ => (value.to_owned(), 1),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_target;

    #[test]
    fn a_bare_point_kills_at_its_first_occurrence_and_a_count_at_the_nth() {
        assert_eq!(parse_target("before-publish"), ("before-publish".into(), 1));
        assert_eq!(
            parse_target("before-publish:3"),
            ("before-publish".into(), 3)
        );
        assert_eq!(parse_target("odd:name"), ("odd:name".into(), 1));
    }
}
