//! The bound on the header and query text of one script's answer
//! ([`MAX_HEAD_TEXT`]), the same on both engines, in every strategy and
//! phase.
//!
//! What a script hands the host is read out of its heap by reference: the
//! names and values of `SetHeaders`, `DeleteHeaders`, `AddParams`,
//! `ExtendedParams`, `DeleteParams`, `ReturnOverrides.ResponseHeaders`, a
//! response hook's and a virtual endpoint's headers. `--jsvm-memory`
//! bounds the heap, not the copies: 3,000 names holding one 4 MiB string
//! are 4 MiB to the script and 12 GiB to the host. So each reader takes
//! every name and value it reads from one [`HeadText`] per answer, and
//! the answer fails (a bad answer, 500, naming the field and the bound)
//! once they pass it, before more is copied. A boa string is taken by its
//! length before it is converted (each UTF-16 unit is at least one UTF-8
//! byte); a QuickJS or JSON one by its bytes once read, so at most one
//! string past the bound is ever copied.

use crate::middleware::{HeadBudget, MwError, MAX_HEAD_TEXT};

/// One answer's [`HeadBudget`], its refusal naming the field.
#[derive(Debug, Default)]
pub(crate) struct HeadText(HeadBudget);

impl HeadText {
    /// A full budget, for one answer.
    pub(crate) fn new() -> HeadText {
        HeadText(HeadBudget::new())
    }

    /// Takes `len` bytes read from `field`; the error once the answer's
    /// text passes the bound.
    #[inline]
    pub(crate) fn take(&mut self, field: &str, len: usize) -> Result<(), MwError> {
        self.pair(field, len, 0)
    }

    /// [`take`](Self::take) for a name and its value.
    #[inline]
    pub(crate) fn pair(&mut self, field: &str, name: usize, value: usize) -> Result<(), MwError> {
        self.0.take(name, value).map_err(|_| past(field))
    }
}

#[cold]
fn past(field: &str) -> MwError {
    MwError::bad_answer(format!(
        "{field}: the answer's header and query names and values pass {MAX_HEAD_TEXT} bytes \
         (1 MiB), the most one call may hand the host"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_one_answer_s_total_across_its_fields() {
        let mut t = HeadText::new();
        t.pair("Request.SetHeaders", 10, MAX_HEAD_TEXT / 2).unwrap();
        t.take("Request.DeleteHeaders", MAX_HEAD_TEXT / 2 - 10)
            .unwrap();
        t.take("Request.AddParams", 0).unwrap();
        let e = t.take("Request.AddParams", 1).unwrap_err();
        assert!(e.to_string().contains("Request.AddParams"), "{e}");
        assert!(e.to_string().contains("1048576 bytes"), "{e}");
        // An overflowing length is past the bound, never a wrap.
        let mut t = HeadText::new();
        assert!(t.pair("f", usize::MAX, 2).is_err());
    }
}
