//! Names Windows cannot hold, refused before an output is written.
//!
//! One rule serves every writer (split and recombine's artifact trees, transform's archives,
//! the wheel splitter's members): [`OutputNames`] checks each member of one output, a
//! `/`-separated path relative to it, against [`NameRules`]. The rules are Windows's whenever
//! kpack runs on Windows, and on any system for an output meant for Windows (the caller
//! says so: an option, or a wheel's `win_*` platform tag); elsewhere nothing is refused.
//!
//! What Windows cannot hold, per component of a member's path:
//! * a device name (`CON`, `PRN`, `AUX`, `NUL`, `CONIN$`, `CONOUT$`, `COM1`–`COM9`,
//!   `LPT1`–`LPT9`, and `COM¹²³`/`LPT¹²³` with superscript digits), in any case, also with
//!   an extension or spaces before it (`nul.txt`, `Aux .tar.gz`): opening one opens the device;
//! * a character Win32 refuses in a file name (`<>:"|?*`, `\`, which is a separator there,
//!   and control characters U+0000–U+001F);
//! * a trailing dot or space, which Win32 strips (`a.` and `a` are one file);
//! * two members that differ only in case (`Foo.kpack` beside `foo.kpack`), or a directory
//!   spelled two ways (`Lib/a` beside `lib/b`): NTFS compares names case-insensitively.
//!
//! Case is compared as NTFS does, through a per-character uppercase table: each character's
//! Unicode *simple* uppercase mapping (`char::to_uppercase` when it gives one character; a
//! character whose uppercase is several, like `ß`, is kept as it is, as NTFS keeps it). The
//! table of a given volume may be older than Rust's Unicode version; the difference is in
//! recently added scripts only.
//!
//! Hand-written: the crates that sanitise Windows names (`sanitize-filename` and the like)
//! rewrite a name into a safe one; kpack must refuse, naming the member, and none checks
//! case collisions across one output.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Which names an output may hold. Made only by [`NameRules::for_output`], so that a
/// kpack running on Windows always applies Windows's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameRules {
    windows: bool,
}

impl NameRules {
    /// The rules of an output: Windows's on Windows, and on every system when the output
    /// is `meant_for_windows`; otherwise this system's, which refuse nothing here.
    pub fn for_output(meant_for_windows: bool) -> NameRules {
        NameRules {
            windows: cfg!(windows) || meant_for_windows,
        }
    }

    /// Whether Windows's rules apply (and target ids are spelled for Windows in file names:
    /// `kpack_target::file_name_spelling`).
    pub fn windows(self) -> bool {
        self.windows
    }
}

/// A member of an output that Windows cannot hold.
#[derive(Debug, thiserror::Error)]
#[error("{}: member {member} {problem}", output.display())]
pub struct NameError {
    /// The output (a directory, tarball or wheel).
    pub output: PathBuf,
    /// The member, as the output would name it (`/`-separated).
    pub member: String,
    /// What is wrong with it.
    pub problem: NameProblem,
}

/// Why Windows cannot hold a member.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameProblem {
    /// A component is a device name.
    #[error("is named after the device {device}, which Windows reserves")]
    Reserved {
        /// The device (`NUL`, `COM1`, …).
        device: String,
    },
    /// A component holds a character Windows refuses.
    #[error("holds the character {}, which Windows refuses in a file name", .0.escape_default())]
    Character(char),
    /// A component ends in a dot or a space.
    #[error("ends in a dot or a space, which Windows strips from a file name")]
    TrailingDotOrSpace,
    /// Two members differ only in case.
    #[error("differs only in case from {other}, and Windows holds one of the two")]
    CaseCollision {
        /// The member (or the directory of one) checked before, spelled differently.
        other: String,
    },
}

/// Every member of one output checked against one set of [`NameRules`], collisions among
/// them included.
#[derive(Debug)]
pub struct OutputNames {
    output: PathBuf,
    rules: NameRules,
    /// Each member and directory seen, by its case-folded path, as it was first spelled.
    seen: HashMap<String, String>,
}

impl OutputNames {
    /// A check of the members of `output` (named in errors).
    pub fn new(output: &Path, rules: NameRules) -> OutputNames {
        OutputNames {
            output: output.to_owned(),
            rules,
            seen: HashMap::new(),
        }
    }

    /// Checks `member` (a `/`-separated path relative to the output), and that it and its
    /// directories differ from the members checked before by more than case. Empty and `.`
    /// components are skipped (`./lib/x` names `lib/x`).
    pub fn check(&mut self, member: &str) -> Result<(), NameError> {
        if !self.rules.windows {
            return Ok(());
        }
        let fail = |problem| NameError {
            output: self.output.clone(),
            member: member.to_owned(),
            problem,
        };
        let mut spelled = String::new();
        let mut folded = String::new();
        for component in member.split('/').filter(|c| !c.is_empty() && *c != ".") {
            component_problem(component).map_or(Ok(()), |p| Err(fail(p)))?;
            if !spelled.is_empty() {
                spelled.push('/');
                folded.push('/');
            }
            spelled.push_str(component);
            folded.extend(component.chars().map(simple_uppercase));
            match self.seen.get(&folded) {
                Some(other) if *other != spelled => {
                    return Err(fail(NameProblem::CaseCollision {
                        other: other.clone(),
                    }));
                }
                Some(_) => {}
                None => {
                    self.seen.insert(folded.clone(), spelled.clone());
                }
            }
        }
        Ok(())
    }

    /// Checks every member of `members` (see [`OutputNames::check`]).
    pub fn check_all<'m>(
        &mut self,
        members: impl IntoIterator<Item = &'m str>,
    ) -> Result<(), NameError> {
        members.into_iter().try_for_each(|m| self.check(m))
    }
}

/// The devices Win32 opens in place of a file of that name (with any extension).
const DEVICES: [&str; 24] = [
    "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "COM1", "COM2", "COM3", "COM4", "COM5",
    "COM6", "COM7", "COM8", "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8",
    "LPT9",
];

/// Why Windows cannot hold the file name `component`, if it cannot.
fn component_problem(component: &str) -> Option<NameProblem> {
    if let Some(c) = component
        .chars()
        .find(|&c| matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*' | '\\') || c < ' ')
    {
        return Some(NameProblem::Character(c));
    }
    if component.ends_with(['.', ' ']) {
        return Some(NameProblem::TrailingDotOrSpace);
    }
    let stem = component.split('.').next().unwrap_or_default().trim_end();
    // `COM¹` is `COM1` to Win32: the superscript digits one to three count as digits there.
    let stem: String = stem
        .chars()
        .map(|c| match c {
            '¹' => '1',
            '²' => '2',
            '³' => '3',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    DEVICES
        .iter()
        .find(|d| **d == stem)
        .map(|d| NameProblem::Reserved {
            device: (*d).to_owned(),
        })
}

/// `c`'s simple uppercase mapping: itself when its uppercase is not one character.
fn simple_uppercase(c: char) -> char {
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(member: &str) -> Option<NameProblem> {
        OutputNames::new(Path::new("out"), NameRules::for_output(true))
            .check(member)
            .err()
            .map(|e| e.problem)
    }

    #[test]
    fn device_names_are_reserved_in_any_case_with_any_extension_and_superscript_digits() {
        for name in [
            "CON",
            "nul.txt",
            "Aux.tar.gz",
            "com1.so",
            "LPT9",
            "com¹",
            "nul .txt",
        ] {
            assert!(
                matches!(
                    problem(&format!("lib/{name}")),
                    Some(NameProblem::Reserved { .. })
                ),
                "{name}"
            );
        }
        for name in ["CONSOLE", "nul_", "com0", "com10", "xnul", "lpt"] {
            assert_eq!(problem(name), None, "{name}");
        }
    }

    #[test]
    fn folding_keeps_a_character_whose_uppercase_is_several() {
        assert_eq!(simple_uppercase('ß'), 'ß');
        assert_eq!(simple_uppercase('é'), 'É');
        let mut names = OutputNames::new(Path::new("out"), NameRules::for_output(true));
        names.check_all(["straße", "STRASSE", "été"]).unwrap();
        assert!(names.check("ÉTÉ").is_err());
    }
}
