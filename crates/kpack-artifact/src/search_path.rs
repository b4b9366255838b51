//! A marker's search paths against installed names, as the runtime reads them: relative to
//! the binary's directory, `@GFXARCH@` in the file name standing for a target (or, after
//! `recombine --group-archives`, a group). Verify resolves markers with it; recombine checks
//! with it that the packages it writes reach every archive they hold.

/// The installed path `rel` names relative to the directory of the installed path `from`,
/// as components (`.` and `..` resolved); `None` if it leaves the tree.
pub(crate) fn beside<'a>(from: &'a str, rel: &'a str) -> Option<Vec<&'a str>> {
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts)
}

/// A search path resolved from a binary: the installed directory it names and its file
/// name around `@GFXARCH@`.
pub(crate) struct Pattern<'s> {
    /// The directory, as an installed path.
    pub(crate) dir: String,
    before: &'s str,
    after: &'s str,
}

impl<'s> Pattern<'s> {
    /// The search path `search` of the binary installed at `bin`; why it names nothing
    /// otherwise.
    pub(crate) fn of(bin: &'s str, search: &'s str) -> Result<Pattern<'s>, String> {
        let mut parts =
            beside(bin, search).ok_or(format!("search path {search} leaves the install tree"))?;
        let file = parts.pop().unwrap_or_default();
        let Some((before, after)) = file.split_once("@GFXARCH@") else {
            return Err(format!(
                "search path {search} has no @GFXARCH@ in its file name"
            ));
        };
        Ok(Pattern {
            dir: parts.join("/"),
            before,
            after,
        })
    }

    /// What `@GFXARCH@` stands for in the file name `name`, if the pattern matches it.
    pub(crate) fn gfxarch<'n>(&self, name: &'n str) -> Option<&'n str> {
        name.strip_prefix(self.before)
            .and_then(|n| n.strip_suffix(self.after))
            .filter(|t| !t.is_empty())
    }
}
