//! What `--wasm-memory` bounds: everything an instance can make grow, its
//! linear memories and its tables, counted together.
//!
//! wasmtime's own `StoreLimits` bounds each memory by itself and tables not
//! at all, so a module with eight memories could hold eight times the limit
//! and one `table.grow` of 20 million elements took 160 MB. Here one budget
//! per instance (per store: the plugin and the host's lifecycle module,
//! which has neither) is charged for every page and every table element.

use wasmtime::ResourceLimiter;

/// The most memories, and the most tables, one module may define. Compilers
/// for proxy-wasm emit one of each; the bound keeps a module from reserving
/// address space for thousands of empty memories, which the byte budget
/// would not see.
pub const MAX_MEMORIES: usize = 8;
pub const MAX_TABLES: usize = 8;

/// What a table element costs wasmtime: a pointer (`ResourceLimiter`'s
/// documentation).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// One instance's budget, in bytes.
pub struct InstanceLimits {
    limit: usize,
    used: usize,
    /// What the growth being made was charged, given back if it fails
    /// after all (calls on one store never overlap).
    pending: usize,
}

impl InstanceLimits {
    pub fn new(limit: usize) -> InstanceLimits {
        InstanceLimits {
            limit,
            used: 0,
            pending: 0,
        }
    }

    /// Charges `bytes` more, or refuses with a message naming the flag. A
    /// refusal is an error, not `Ok(false)`: the call traps there (the
    /// request gets 500) instead of leaving the module a failed grow it
    /// probably ignores; at instantiation it fails the start.
    fn charge(&mut self, bytes: usize, what: &str) -> wasmtime::Result<bool> {
        let used = self.used.saturating_add(bytes);
        if used > self.limit {
            return Err(wasmtime::Error::msg(format!(
                "{what} would bring the instance's memories and tables to {used} bytes, \
                 past the limit of {} bytes (--wasm-memory)",
                self.limit
            )));
        }
        (self.used, self.pending) = (used, bytes);
        Ok(true)
    }

    fn refund(&mut self) {
        self.used -= std::mem::take(&mut self.pending);
    }
}

impl ResourceLimiter for InstanceLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Past the module's own declared maximum: `memory.grow` fails as
        // the specification says (-1); that is not ours to stop.
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        let what = if current == 0 {
            format!("a linear memory of {desired} bytes")
        } else {
            format!("growing a linear memory to {desired} bytes")
        };
        self.charge(desired.saturating_sub(current), &what)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.refund();
        Err(error.context("growing a linear memory failed"))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        let bytes = desired
            .saturating_sub(current)
            .saturating_mul(TABLE_ELEMENT_BYTES);
        self.charge(bytes, &format!("a table of {desired} elements"))
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.refund();
        Err(error.context("growing a table failed"))
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_budget() {
        let mut l = InstanceLimits::new(1 << 20);
        assert!(l.memory_growing(0, 512 << 10, None).unwrap());
        assert!(l.memory_growing(0, 256 << 10, None).unwrap());
        let e = l.memory_growing(0, 512 << 10, None).unwrap_err();
        assert!(e.to_string().contains("--wasm-memory"), "{e}");
        let elements = (256 << 10) / TABLE_ELEMENT_BYTES;
        assert!(l.table_growing(0, elements, None).unwrap());
        assert!(l.table_growing(elements, elements + 1, None).is_err());
        // A memory's own maximum fails the grow, as the spec says.
        assert!(!l.memory_growing(0, 2 << 20, Some(1 << 20)).unwrap());
    }
}
