//! What a Tyk API definition's `custom_middleware` means, where both the
//! gateway (which runs it) and `loadgen bench` (which labels and pairs its
//! routes by it) must agree: one definition, so the bench cannot count a
//! hook or a driver name the gateway does not.

/// The hooks whose entries the gateway runs (`post_key_auth` is Tyk's, but
/// there are no keys here: the gateway's lint warns and runs nothing).
pub const HOOKS: [&str; 3] = ["pre", "post", "response"];

/// What runs an entry, by Tyk's `driver` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverFamily {
    /// A dynamic library behind the C ABI (`goplugin`, `native`).
    Native,
    /// A script in an embedded JS engine (`otto`, `goja`, `javascript`).
    Js,
    /// A proxy-wasm module (`wasm`, `proxy-wasm`).
    Wasm,
}

impl DriverFamily {
    /// The family of a `driver` name, exactly as written (Tyk's names are
    /// lower case); `None` for a name no driver answers to.
    pub fn of(name: &str) -> Option<DriverFamily> {
        match name {
            "goplugin" | "native" => Some(DriverFamily::Native),
            "otto" | "goja" | "javascript" => Some(DriverFamily::Js),
            "wasm" | "proxy-wasm" => Some(DriverFamily::Wasm),
            _ => None,
        }
    }

    /// The short name the bench keys routes by: `native`, `js`, `wasm`.
    pub fn key(self) -> &'static str {
        match self {
            DriverFamily::Native => "native",
            DriverFamily::Js => "js",
            DriverFamily::Wasm => "wasm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tyk_driver_name_has_one_family_and_case_matters() {
        for (name, family) in [
            ("goplugin", DriverFamily::Native),
            ("native", DriverFamily::Native),
            ("otto", DriverFamily::Js),
            ("goja", DriverFamily::Js),
            ("javascript", DriverFamily::Js),
            ("wasm", DriverFamily::Wasm),
            ("proxy-wasm", DriverFamily::Wasm),
        ] {
            assert_eq!(DriverFamily::of(name), Some(family), "{name}");
        }
        assert_eq!(DriverFamily::of("Otto"), None);
        assert_eq!(DriverFamily::of("python"), None);
        assert!(!HOOKS.contains(&"post_key_auth"));
    }
}
