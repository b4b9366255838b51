//! The crash-test hook.

/// The environment variable naming the point at which [`fault_point`] kills the process.
pub const FAULT_ENV: &str = "KPACK_TEST_KILL_AT";

/// A test hook: when the environment variable [`FAULT_ENV`] names `point`, the process sends
/// itself `SIGKILL` here, so crash tests can stop the real `kpack` binary at a chosen step of
/// writing its outputs and check what is left. The points: `stage-created` (a job's first
/// staging directory exists, nothing written), `atomic-written` (a temporary file is written,
/// not renamed), `before-publish` (every output of a job staged, none published),
/// `publish-partial` (the first of several outputs published), and those the commands name
/// themselves (`transform-host-written`).
///
/// The variable is read once; unset (as it always is outside tests) this costs a load.
pub fn fault_point(point: &str) {
    static TARGET: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let target = TARGET.get_or_init(|| std::env::var(FAULT_ENV).ok());
    if target.as_deref() == Some(point) {
        // A kill -9 of ourselves: no destructor, no flush, exactly what a crash leaves.
        use rustix::process::{Signal, getpid, kill_process};
        let _ = kill_process(getpid(), Signal::KILL);
        // SIGKILL cannot be caught or blocked; wait for it rather than run on.
        loop {
            std::thread::park();
        }
    }
}
