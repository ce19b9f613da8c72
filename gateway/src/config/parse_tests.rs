//! Unit tests of type errors and listen path normalisation.
use super::*;

#[test]
fn type_errors_name_their_field() {
    let json = br#"{"api_id": "a", "use_keyless": true,
        "proxy": {"listen_path": "/a/", "target_url": "http://h:1", "strip_listen_path": "yes"},
        "custom_middleware": {"pre": [{"name": "x", "path": "p", "disabled": 1}]}}"#;
    let e = parse_definition(Path::new("a.json"), json).unwrap_err();
    assert_eq!(e.field, "custom_middleware.pre[0].disabled");
    let json = br#"{"api_id": "a", "use_keyless": true,
        "proxy": {"listen_path": "/a/", "target_url": "http://h:1", "strip_listen_path": "yes"}}"#;
    let e = parse_definition(Path::new("a.json"), json).unwrap_err();
    assert_eq!(e.field, "proxy.strip_listen_path");
    assert!(
        e.to_string()
            .starts_with("a.json: proxy.strip_listen_path: invalid type"),
        "{e}"
    );
}

#[test]
fn listen_paths_are_cleaned_as_tyks_valid_listen_path() {
    for (raw, clean) in [
        ("gopl/", "/gopl/"),
        ("/gopl", "/gopl"),
        ("/a//b/", "/a/b/"),
        ("/a/./b/../c", "/a/c"),
        ("/../x/", "/x/"),
        ("/", "/"),
        ("//", "/"),
    ] {
        assert_eq!(normalize_listen_path(raw), clean, "{raw}");
    }
}

/// `config_data` is free-form: one nested deeper than serde_json reads
/// (128 levels; Go's decoder, so Tyk, reads 10,000) is a valid definition
/// whose API fails closed, routed, naming the field. It was "not loaded":
/// unrouted, so its traffic fell through to a shorter listen path (a `/`
/// catch-all's upstream answered it). Deep nesting anywhere else is still
/// invalid JSON.
#[test]
fn a_config_data_deeper_than_serde_reads_fails_its_api_closed() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let def = |id: &str, config: &str, extra: &str| {
        format!(
            r#"{{"api_id": "{id}", "use_keyless": true, "config_data": {config},
                "proxy": {{"listen_path": "/{id}/", "target_url": "http://h:1"{extra}}}}}"#
        )
    };
    std::fs::write(dir.path().join("deep.json"), def("deep", &deep, "")).unwrap();
    let elsewhere = def("elsewhere", "{}", &format!(r#", "x": {deep}"#));
    std::fs::write(dir.path().join("elsewhere.json"), elsewhere).unwrap();
    let loaded = load_dir(dir.path()).unwrap();
    assert!(loaded.apis.is_empty());
    let [(spec, why)] = &loaded.refused[..] else {
        panic!("{:?}", loaded.refused)
    };
    assert_eq!(spec.listen_path, "/deep/");
    assert_eq!(why.field, "config_data");
    let [e] = &loaded.errors[..] else {
        panic!("{:?}", loaded.errors)
    };
    assert!(e.to_string().contains("recursion limit exceeded"), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}", dir.path().join("elsewhere.json").display())),
        "{e}"
    );
}
