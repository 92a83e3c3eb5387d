//! The parser never panics, whatever the bytes, and every diagnostic points into the file.

use hookbox_hooks::config::parse;
use proptest::prelude::*;
use serde_json::Value;

/// JSON values biased towards the hooks schema's own keys and types.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("enabled".to_owned()),
        Just("pre_tool_execution".to_owned()),
        Just("post_tool_execution".to_owned()),
        Just("matcher".to_owned()),
        Just("hooks".to_owned()),
        Just("type".to_owned()),
        Just("command".to_owned()),
        Just("http".to_owned()),
        Just("url".to_owned()),
        Just("headers".to_owned()),
        Just("timeout".to_owned()),
        "[a-z\\-_ ]{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<i64>().prop_map(|i| Value::Number(i.into())),
        prop_oneof![
            Just("command".to_owned()),
            Just("http".to_owned()),
            Just("*_file".to_owned()),
            Just("https://x.example/".to_owned()),
            "\\PC{0,12}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse("/.agents/hooks.json", &bytes);
    }

    #[test]
    fn arbitrary_schema_shaped_json_never_panics(value in json_value()) {
        let text = value.to_string();
        let (groups, diagnostics) = parse("/.agents/hooks.json", text.as_bytes());
        for d in &diagnostics {
            prop_assert!(d.path.starts_with('$'));
            prop_assert_eq!(d.file.as_str(), "/.agents/hooks.json");
        }
        // Whatever survives is well-formed.
        for g in &groups {
            for rule in g.pre_tool_execution.iter().chain(&g.post_tool_execution) {
                for h in &rule.handlers {
                    prop_assert!(!h.timeout.is_zero());
                    prop_assert!(!h.kind.target().trim().is_empty());
                }
            }
        }
    }
}
