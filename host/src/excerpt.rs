//! Excerpts: text from elsewhere (an API server's error, a diff, a registry's message) cut to
//! a size before it goes into a log line, an Event or a status entry, where a long one would
//! fill the log or push an object past what the API server stores.

use std::borrow::Cow;

/// Marks where an excerpt was cut.
const CUT: &str = "...";

/// `text` if it fits in `max` bytes, else its start cut at a character boundary and marked
/// ([`CUT`]), `max` bytes at most in all.
pub fn excerpt(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(CUT.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{CUT}", &text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_at_a_character_boundary_and_marked() {
        assert_eq!(excerpt(&"é".repeat(100), 10), "ééé...");
        assert_eq!(excerpt(&"x".repeat(11), 10), "xxxxxxx...");
    }

    #[test]
    fn text_that_fits_is_left_whole() {
        assert!(matches!(excerpt("0123456789", 10), Cow::Borrowed("0123456789")));
    }
}
