//! Per-file script scope, as Tyk's goja driver has it: each middleware file
//! runs inside a function of its own, so a `pre` and a `post` file that both
//! declare `var handler` each keep their own `handler`.
//!
//! [`wrap`] turns a file's source into
//!
//! ```js
//! (function () { var handler; __tykScope[3] = function () { ... return handler ... }; Object.defineProperty(globalThis, "handler", {get..., set...});<the file, unchanged>
//! })();
//! ```
//!
//! all of the prologue on the file's first line, so line numbers in errors
//! stay the file's own. Per entry the file serves:
//!
//! - `__tykScope[i]` (a hidden global array) gets a getter of the entry's
//!   object, read through the closure: the host resolves every entry once
//!   after all files ran ([`RESOLVE`]) and dispatches to what it found. A
//!   file that throws at top level after defining its object still serves
//!   it (the getter does not depend on reaching the end of the file), as in
//!   Tyk's otto driver.
//! - the plain global name becomes an accessor of the same binding, so code
//!   that names the object globally (`handler.ProcessRequest(...)`, another
//!   file, a host expression) still finds it; with two files exporting one
//!   name, the last file loaded wins that global, as it did before.
//!
//! The prologue declares `var <name>` so the binding is the file's own even
//! when the file assigns it without declaring it; a file that declares the
//! name with `let`, `const` or `class` gets no `var` (that would be a
//! redeclaration), and its lexical binding is what the getter reads.

/// Defines the hidden `__tykScope` array; run before the scripts.
pub(crate) const PROLOGUE: &str = "Object.defineProperty(globalThis, '__tykScope', { value: [], enumerable: false, writable: false, configurable: false });";

/// Evaluates to the array of every entry's object (undefined where a file
/// does not define it); run after the scripts.
pub(crate) const RESOLVE: &str = "__tykScope.map(function (get) { return get(); })";

/// The entries file `file` serves: `(index, name)` of each entry whose
/// path it is (`files[i]` is entry `i`'s path).
pub(crate) fn served<'a>(
    entries: &'a [(String, String)],
    files: &[std::path::PathBuf],
    file: &std::path::Path,
) -> Vec<(usize, &'a str)> {
    entries
        .iter()
        .zip(files)
        .enumerate()
        .filter(|(_, (_, f))| f.as_path() == file)
        .map(|(i, ((name, _), _))| (i, name.as_str()))
        .collect()
}

/// Wraps `source` (one file) for the entries it serves: `(index, name)`,
/// `index` counting every entry of the API in dispatch order.
pub(crate) fn wrap(source: &str, entries: &[(usize, &str)]) -> String {
    let mut out = String::with_capacity(source.len() + 200 * entries.len() + 32);
    out.push_str("(function () {");
    let mut declared: Vec<&str> = Vec::new();
    for &(index, name) in entries {
        // Not an identifier: the host's check names the field instead of a
        // syntax error in code the user did not write.
        if !is_identifier(name) {
            continue;
        }
        if !declared.contains(&name) {
            declared.push(name);
            if !declares_lexically(source, name) {
                out.push_str(&format!(" var {name};"));
            }
            out.push_str(&format!(
                " try {{ Object.defineProperty(globalThis, '{name}', {{ get: function () {{ return {name}; }}, set: function (v) {{ {name} = v; }}, enumerable: true, configurable: true }}); }} catch (e) {{}}"
            ));
        }
        // A lexical binding read before its declaration ran (the file threw
        // first) is "not defined", not an error of the host.
        out.push_str(&format!(
            " __tykScope[{index}] = function () {{ try {{ return {name}; }} catch (e) {{ return undefined; }} }};"
        ));
    }
    out.push_str(source);
    out.push_str("\n})();\n");
    out
}

/// True when `source` may declare `name` with `let`, `const` or `class`
/// (a textual check: a false positive only drops the `var`, which the file
/// then does not need).
fn declares_lexically(source: &str, name: &str) -> bool {
    ["let", "const", "class"].iter().any(|kw| {
        source.match_indices(kw).any(|(at, _)| {
            let before_ok = source[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !is_ident_char(c));
            let rest = &source[at + kw.len()..];
            let trimmed = rest.trim_start();
            trimmed.len() < rest.len()
                && trimmed.starts_with(name)
                && trimmed[name.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !is_ident_char(c))
                && before_ok
        })
    })
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_declarations_are_recognised() {
        assert!(declares_lexically("const handler = 1", "handler"));
        assert!(declares_lexically("x;\nlet  handler;", "handler"));
        assert!(!declares_lexically("var handler = 1", "handler"));
        assert!(!declares_lexically("const handlerX = 1", "handler"));
        assert!(!declares_lexically("outlet handler", "handler"));
    }

    #[test]
    fn the_prologue_stays_on_the_first_line() {
        let w = wrap("a;\nb;", &[(0, "mw"), (1, "mw")]);
        assert_eq!(w.lines().count(), 3);
        assert_eq!(w.matches("var mw;").count(), 1);
        assert!(w.contains("__tykScope[1]"));
    }
}
