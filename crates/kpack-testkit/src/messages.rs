//! What every user-facing message is checked for: no Rust debug formatting. A name written
//! with `{:?}` comes out quoted and escaped (`"libtwo.so"`), an `Option` as `Some(..)` or
//! `None`, a vector as `["gfx90a"]`, a struct as `Name { field: .. }`; messages write names
//! plainly after the noun that says what they are (`component demo_lib`).

/// The marks Rust's `Debug` leaves in text.
const DEBUG_MARKS: [&str; 7] = ["Some(", "None", "[\"", "\"]", "\"", "{:", " { "];

/// Panics, naming the mark and the text, when `text` shows Rust debug formatting.
pub fn assert_no_debug_formatting(text: &str) {
    for mark in DEBUG_MARKS {
        assert!(
            !text.contains(mark),
            "debug formatting ({mark}) in the message:\n{text}"
        );
    }
}
