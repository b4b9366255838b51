//! The build's timestamp (reproducible-builds.org's `SOURCE_DATE_EPOCH`), read in one place so
//! that every writer of timestamps (tarballs, wheels) takes the same value from it.

/// The environment variable.
pub const SOURCE_DATE_EPOCH: &str = "SOURCE_DATE_EPOCH";

/// [`SOURCE_DATE_EPOCH`] in seconds since 1970-01-01 00:00:00 UTC, surrounding white space
/// ignored; `None` when it is unset or not an integer. Each writer clamps it to what its
/// format can store.
pub fn source_date_epoch() -> Option<i64> {
    std::env::var(SOURCE_DATE_EPOCH)
        .ok()
        .and_then(|v| v.trim().parse().ok())
}
