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
