//! Target IDs in file names (`<module>_<target>.kpack`), spelled for the system that holds them.
//!
//! A target ID's features are joined by `:` (`gfx942:sramecc+:xnack-`), which NTFS refuses in
//! a file name (and Win32 reads as the start of an alternate data stream: `a_gfx90a:xnack+.kpack`
//! would open the stream `xnack+.kpack` of a file `a_gfx90a`). Outputs meant for Windows spell
//! each `:` as `@`, as clang's driver names its per-target outputs on Windows
//! (`Driver::GetNamedOutputPath`); `@` occurs in no target ID and no `+`/`-` feature, so the
//! spelling reads back unambiguously. Linux outputs keep the reference's `:`.

use std::borrow::Cow;

/// What Windows file names write in place of a target ID's `:`.
pub const WINDOWS_FEATURE_SEPARATOR: char = '@';

/// `target` as a file name spells it: unchanged, or with `windows`, each `:` written `@`.
pub fn file_name_spelling(target: &str, windows: bool) -> Cow<'_, str> {
    if windows && target.contains(':') {
        Cow::Owned(target.replace(':', &WINDOWS_FEATURE_SEPARATOR.to_string()))
    } else {
        Cow::Borrowed(target)
    }
}

/// The target ID a file name spells, in either spelling (`@` read as `:`).
pub fn from_file_name_spelling(spelled: &str) -> Cow<'_, str> {
    if spelled.contains(WINDOWS_FEATURE_SEPARATOR) {
        Cow::Owned(spelled.replace(WINDOWS_FEATURE_SEPARATOR, ":"))
    } else {
        Cow::Borrowed(spelled)
    }
}

/// The stem of an archive file name `<stem>_<target>.kpack` whose target is `target`, in
/// either spelling; `None` when `name` is not of that form.
pub fn archive_stem<'n>(name: &'n str, target: &str) -> Option<&'n str> {
    let name = name.strip_suffix(".kpack")?;
    [false, true]
        .into_iter()
        .find_map(|windows| name.strip_suffix(file_name_spelling(target, windows).as_ref()))
        .and_then(|rest| rest.strip_suffix('_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_names_spell_features_with_at_and_read_back() {
        let t = "gfx942:sramecc+:xnack-";
        assert_eq!(file_name_spelling(t, true), "gfx942@sramecc+@xnack-");
        assert_eq!(file_name_spelling(t, false), t);
        assert_eq!(file_name_spelling("gfx11-generic", true), "gfx11-generic");
        assert_eq!(from_file_name_spelling("gfx942@sramecc+@xnack-"), t);
        assert_eq!(
            archive_stem("hip_app_gfx942@sramecc+@xnack-.kpack", t),
            Some("hip_app")
        );
        assert_eq!(
            archive_stem("hip_app_gfx942:sramecc+:xnack-.kpack", t),
            Some("hip_app")
        );
        assert_eq!(archive_stem("hip_app_gfx942.kpack", t), None);
        assert_eq!(archive_stem("hip_appgfx90a.kpack", "gfx90a"), None);
    }
}
