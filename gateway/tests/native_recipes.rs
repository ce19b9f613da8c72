//! plugins/README.md's "your first plugin" recipes, run from the README's
//! own text so the docs cannot rot: the shell blocks of each section run as
//! written (bash, from a checkout root), the JSON block is the definition
//! the real gateway then serves, and the mock upstream's echo shows the
//! plugin ran.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::native::workspace;
use common::{get, mock, start_gateway};
use serde_json::Value;

/// The fenced blocks of one `## heading` section, by language.
fn blocks(section: &str, lang: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(workspace().join("plugins/README.md")).unwrap();
    let start = readme
        .find(&format!("\n## {section}\n"))
        .unwrap_or_else(|| panic!("plugins/README.md has no section {section:?}"));
    let body = &readme[start + section.len() + 5..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let fence = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(&fence) {
        let after = &rest[i + fence.len()..];
        let end = after.find("\n```").expect("an unclosed code block");
        out.push(after[..end + 1].to_string());
        rest = &after[end + 4..];
    }
    assert!(!out.is_empty(), "section {section:?} has no {lang} block");
    out
}

/// A checkout root whose `plugins` is the real one, inside a temp dir, so
/// the recipes' `../my-plugin` lands in the temp dir too.
fn checkout(tmp: &Path) -> PathBuf {
    let root = tmp.join("checkout");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(workspace().join("plugins"), root.join("plugins")).unwrap();
    root
}

/// Runs a section's shell blocks, in order, as one bash script.
fn run_shell(section: &str, root: &Path) {
    let script = blocks(section, "sh").join("\n");
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", &script])
        .current_dir(root);
    // The recipe's own cargo, not the one running these tests, decides
    // where its build goes.
    cmd.env_remove("CARGO_TARGET_DIR");
    if let Some(cargo) = option_env!("CARGO") {
        let dir = Path::new(cargo).parent().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", dir.display()));
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{section}: the README's commands failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The section's definition, with its relative plugin path resolved from
/// `root` (as a gateway started there would) and its target the mock.
fn definition(section: &str, root: &Path, upstream: &str) -> Value {
    let mut def: Value = serde_json::from_str(&blocks(section, "json")[0]).unwrap();
    let entry = &mut def["custom_middleware"]["pre"][0];
    let path = root.join(entry["path"].as_str().unwrap());
    assert!(path.exists(), "the recipe did not build {}", path.display());
    entry["path"] = path.to_str().unwrap().into();
    def["proxy"]["target_url"] = format!("http://{upstream}").into();
    def
}

/// Runs one recipe end to end; returns the echoed `X-Stamp` header.
fn recipe(section: &str) -> (Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let root = checkout(tmp.path());
    run_shell(section, &root);
    let up = mock().to_string();
    let def = definition(section, &root, &up);
    let apis = tmp.path().join("apis");
    std::fs::create_dir_all(&apis).unwrap();
    std::fs::write(apis.join("recipe.json"), def.to_string()).unwrap();
    let gw = start_gateway(&apis);
    assert!(gw.load_errors.is_empty(), "{:?}", gw.load_errors);
    let listen = def["proxy"]["listen_path"].as_str().unwrap();
    let got = get(gw.addr, &format!("{listen}hi"));
    assert_eq!(got.status, 200, "{}", got.text());
    let stamp = got.json()["headers"]["X-Stamp"]
        .as_str()
        .unwrap_or_else(|| panic!("no X-Stamp in {}", got.text()))
        .to_string();
    gw.stop();
    (def, stamp)
}

#[test]
fn the_rust_recipe_builds_and_runs_as_written() {
    let (def, stamp) = recipe("Your first plugin in Rust");
    assert_eq!(def["api_id"], "my-plugin");
    assert_eq!(stamp, "my-plugin for my-plugin");
}

#[test]
fn the_c_recipe_builds_with_warnings_as_errors_and_runs() {
    let (def, stamp) = recipe("Your first plugin in C");
    assert_eq!(stamp, def["api_id"].as_str().unwrap());
}

#[test]
fn the_recipe_s_typo_gets_a_suggestion() {
    let tmp = tempfile::tempdir().unwrap();
    let root = checkout(tmp.path());
    run_shell("Your first plugin in C", &root);
    let mut def = definition("Your first plugin in C", &root, &mock().to_string());
    def["custom_middleware"]["pre"][0]["name"] = "stamp".into();
    let apis = tmp.path().join("apis");
    std::fs::create_dir_all(&apis).unwrap();
    std::fs::write(apis.join("typo.json"), def.to_string()).unwrap();
    let gw = start_gateway(&apis);
    let e = gw.load_errors.first().expect("a load error").to_string();
    assert!(e.contains(r#"does not export symbol "stamp""#), "{e}");
    assert!(e.contains("it exports [Stamp]"), "{e}");
    assert!(e.contains(r#"did you mean "Stamp"?"#), "{e}");
    gw.stop();
}
