//! Reading: a directory's `*.json` files, each parsed (naming the line,
//! column or field of an error) and linted, then validated and sorted into
//! served, refused, internal and broken.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::validate::validate;
use super::{lint, virtuals, ApiDefinition, LoadError, Loaded};

/// Whether `file` (a `*.json` entry of the directory, symbolic links
/// followed) is a regular file to read. Anything else is an error the
/// user sees, never skipped in silence: a directory, a link to nothing,
/// and a FIFO, socket or device (reading a FIFO would wait for a writer
/// forever).
fn readable(file: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(file)?;
    if meta.is_dir() {
        return Err(std::io::Error::other(
            "it is a directory, not a definition file",
        ));
    }
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "it is not a regular file (a FIFO, socket or device)",
        ));
    }
    Ok(())
}

/// Reads and validates every `*.json` in `dir` (not recursive), in name order.
///
/// Fails only when the directory itself cannot be read; each bad file is an
/// entry in [`Loaded::errors`].
pub fn load_dir(dir: &Path) -> std::io::Result<Loaded> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut loaded = Loaded::default();
    let mut seen_paths = HashSet::new();
    let mut seen_ids = HashSet::new();
    for file in files {
        let (def, findings) = match readable(&file)
            .and_then(|()| std::fs::read(&file))
            .map_err(|e| LoadError::new(&file, "-", format!("cannot read: {e}")))
            .and_then(|bytes| parse_checked(&file, &bytes))
        {
            Ok(parsed) => parsed,
            Err(e) => {
                loaded.errors.push(e);
                continue;
            }
        };
        if !def.active {
            loaded.inactive.push(file);
            continue;
        }
        let version_data = def.version_data.clone();
        let mut spec = match validate(&file, def) {
            Ok(spec) => spec,
            Err(e) => {
                loaded.errors.push(e);
                continue;
            }
        };
        // A broken virtual endpoint fails its API closed (below), as a
        // broken middleware does: its path must never reach the upstream.
        let mut findings = findings;
        match virtuals::parse(&file, &version_data) {
            Ok(list) => spec.virtual_endpoints = list,
            Err(e) => findings.refuse(e),
        }
        loaded.warnings.extend(findings.warnings);
        if findings.internal {
            // Never routed, so it cannot clash with a public listen path.
            loaded.internal.push(spec);
            continue;
        }
        if !seen_paths.insert(spec.listen_path.clone()) {
            loaded.errors.push(LoadError::new(
                &file,
                "proxy.listen_path",
                format!("{:?} is already served by another API", spec.listen_path),
            ));
        } else if !seen_ids.insert(spec.api_id.clone()) {
            seen_paths.remove(&spec.listen_path);
            loaded.errors.push(LoadError::new(
                &file,
                "api_id",
                format!("{:?} is already used by another API", spec.api_id),
            ));
        } else if let Some(why) = findings.refusal {
            loaded.refused.push((spec, why));
        } else {
            loaded.apis.push(spec);
        }
    }
    Ok(loaded)
}

/// Parses one definition's JSON, naming the line and column of a syntax error
/// and the field of a type error.
pub fn parse_definition(file: &Path, bytes: &[u8]) -> Result<ApiDefinition, LoadError> {
    parse_checked(file, bytes).map(|(def, _)| def)
}

/// Parses a definition and lints the raw JSON: warnings, typos, refusals.
fn parse_checked(file: &Path, bytes: &[u8]) -> Result<(ApiDefinition, lint::Findings), LoadError> {
    // serde_json's message already ends "at line L column C".
    let invalid = |e: serde_json::Error| LoadError::new(file, "-", format!("invalid JSON: {e}"));
    let (value, too_deep) = match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => (value, None),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
            match without_config_data(bytes) {
                Some(value) => (value, Some(e)),
                None => return Err(invalid(e)),
            }
        }
        Err(e) => return Err(invalid(e)),
    };
    if !value.is_object() {
        return Err(LoadError::new(
            file,
            "-",
            "an API definition must be a JSON object",
        ));
    }
    for (field, check) in [
        ("api_id", Value::is_string as fn(&Value) -> bool),
        ("proxy", Value::is_object),
        ("custom_middleware", Value::is_object),
    ] {
        if let Some(v) = value.get(field) {
            if !check(v) && !v.is_null() {
                return Err(LoadError::new(
                    file,
                    field,
                    format!("has the wrong type: {v}"),
                ));
            }
        }
    }
    let mut findings = lint::check(file, &value);
    if let Some(e) = too_deep {
        findings.refuse(LoadError::new(
            file,
            "config_data",
            format!("nests deeper than this gateway reads (128 levels: {e}); Tyk reads it, so the API fails closed rather than go unrouted"),
        ));
    }
    let mut value = value;
    drop_nulls(&mut value);
    // serde_path_to_error names the field a type error is in
    // (`proxy.strip_listen_path: invalid type: string "yes", expected a boolean`).
    let def = serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { "-".to_string() } else { field };
        LoadError::new(file, field, e.into_inner().to_string())
    })?;
    Ok((def, findings))
}

/// The definition with `config_data` skipped unread (as `null`), when the
/// whole text nests deeper than serde_json reads (128 levels; Go's decoder,
/// so Tyk, reads 10,000): `config_data` is free-form, and a deep one made
/// a valid Tyk definition "not loaded", its listen path unrouted, so that
/// its traffic fell through to a shorter one (a `/` catch-all). Read so,
/// the API is routed and fails closed. `None` if the rest is too deep too.
fn without_config_data(bytes: &[u8]) -> Option<Value> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};

    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = serde_json::Map<String, Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an API definition object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                // serde_json skips a value without recursing, at any depth.
                let value = if key == "config_data" {
                    map.next_value::<IgnoredAny>()?;
                    Value::Null
                } else {
                    map.next_value::<Value>()?
                };
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let members = de.deserialize_map(Members).ok()?;
    de.end().ok()?;
    Some(Value::Object(members))
}

/// Removes the members whose value is `null`, as Go's `json.Unmarshal`
/// (so Tyk) reads them: a `null` leaves a field as it was, its zero value
/// (`"strip_listen_path": null` was refused as the wrong type). Not inside
/// `config_data`, which scripts see as it was written.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|_, v| !v.is_null());
            for (key, v) in members.iter_mut() {
                if key != "config_data" {
                    drop_nulls(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}
