use super::*;

fn parse_str(json: &str) -> (Vec<Group>, Vec<Diagnostic>) {
    parse("/.agents/hooks.json", json.as_bytes())
}

fn only(diags: &[Diagnostic]) -> &Diagnostic {
    assert_eq!(diags.len(), 1, "{diags:#?}");
    &diags[0]
}

#[test]
fn reference_configuration_parses_cleanly_in_order() {
    let (groups, diags) = parse_str(include_str!("../../tests/fixtures/reference-combined.json"));
    assert!(diags.is_empty(), "{diags:#?}");
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    // Not alphabetical: file order.
    assert_eq!(names, ["security-gate", "auto-format"]);
    let gate = &groups[0];
    assert!(gate.enabled);
    assert_eq!(
        gate.pre_tool_execution[0].handlers[0].timeout,
        Duration::from_secs(10)
    );
    assert_eq!(
        gate.pre_tool_execution[0].handlers[0].kind,
        HandlerKind::Command {
            command: "python3 /.agents/hooks-scripts/gate.py".into()
        }
    );
    assert!(matches!(
        groups[1].post_tool_execution[0].matcher,
        Matcher::All
    ));
}

#[test]
fn defaults_enabled_true_and_timeout_30() {
    let (groups, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"*","hooks":[{"type":"http","url":"https://x.example/"}]}]}}"#,
    );
    assert!(diags.is_empty(), "{diags:#?}");
    assert!(groups[0].enabled);
    assert_eq!(
        groups[0].pre_tool_execution[0].handlers[0].timeout,
        DEFAULT_TIMEOUT
    );
}

#[test]
fn enabled_false_is_kept() {
    let (groups, _) = parse_str(r#"{"g":{"enabled":false,"pre_tool_execution":[]}}"#);
    assert!(!groups[0].enabled);
}

#[test]
fn bad_json_reports_position_and_yields_nothing() {
    let (groups, diags) = parse_str("{\"g\": {\n  \"pre_tool_execution\": [,]\n}}");
    assert!(groups.is_empty());
    let d = only(&diags);
    assert_eq!(d.severity, Severity::Error);
    assert!(d.message.contains("line 2"), "{d}");
}

#[test]
fn top_level_must_be_an_object() {
    let (groups, diags) = parse_str("[1,2]");
    assert!(groups.is_empty());
    assert!(only(&diags).message.contains("found an array of 2 item(s)"));
}

#[test]
fn broken_parts_are_skipped_and_the_rest_applies() {
    let json = r#"{
      "broken-group": 42,
      "good": {"pre_tool_execution": [
        {"matcher": 7, "hooks": []},
        {"matcher": "view_file", "hooks": [
          {"type": "command"},
          {"type": "ftp", "url": "x"},
          {"type": "command", "command": "a", "timeout": -1},
          {"type": "command", "command": "b", "timeout": 2}
        ]}
      ]}
    }"#;
    let (groups, diags) = parse_str(json);
    assert_eq!(groups.len(), 1);
    let rules = &groups[0].pre_tool_execution;
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].index, 1);
    assert_eq!(rules[0].handlers.len(), 1);
    assert_eq!(rules[0].handlers[0].index, 3);
    let paths: Vec<(&str, Severity)> = diags
        .iter()
        .map(|d| (d.path.as_str(), d.severity))
        .collect();
    assert_eq!(
        paths,
        [
            (r#"$["broken-group"]"#, Severity::Error),
            ("$.good.pre_tool_execution[0].matcher", Severity::Error),
            ("$.good.pre_tool_execution[1].hooks[0]", Severity::Error),
            (
                "$.good.pre_tool_execution[1].hooks[1].type",
                Severity::Error
            ),
            (
                "$.good.pre_tool_execution[1].hooks[2].timeout",
                Severity::Error
            ),
        ]
    );
    assert!(
        diags[1]
            .message
            .contains("expected a regular expression string, found number 7")
    );
    assert!(diags[3].message.contains("unknown handler type \"ftp\""));
}

#[test]
fn non_boolean_enabled_keeps_the_group_on() {
    let (groups, diags) = parse_str(r#"{"g":{"enabled":"no","pre_tool_execution":[]}}"#);
    assert!(groups[0].enabled);
    assert_eq!(only(&diags).path, "$.g.enabled");
}

#[test]
fn invalid_glob_matcher_is_an_error_with_a_hint() {
    let (groups, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"*_file","hooks":[{"type":"command","command":"x"}]}]}}"#,
    );
    // The rule is kept (it is visible in traces) but matches nothing.
    assert!(
        groups[0].pre_tool_execution[0]
            .matcher
            .matched_tools()
            .is_empty()
    );
    let d = only(&diags);
    assert_eq!(d.severity, Severity::Error);
    assert!(d.message.contains(r#"".*_file""#), "{d}");
}

#[test]
fn matcher_naming_no_tool_is_an_error_with_the_nearest_name() {
    let (_, diags) = parse_str(
        r#"{"g":{"post_tool_execution":[{"matcher":"read_file|write_file","hooks":[{"type":"command","command":"x"}]}]}}"#,
    );
    let d = only(&diags);
    // The rule never runs: the gate it meant to install is not in force (#31).
    assert_eq!(d.severity, Severity::Error);
    assert!(d.message.contains(r#""read_file" → "view_file""#), "{d}");
    assert!(
        d.message.contains(r#""write_file" → "write_to_file""#),
        "{d}"
    );
}

#[test]
fn misspelt_event_key_is_an_error() {
    // `pre_tool_exec` was a warning and `hooks check` exited 0 with the gate gone (#31).
    let (_, diags) = parse_str(
        r#"{"g":{"pre_tool_exec":[{"matcher":"*","hooks":[{"type":"command","command":"x"}]}]}}"#,
    );
    let errors: Vec<_> = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    assert_eq!(errors.len(), 1, "{diags:#?}");
    assert_eq!(errors[0].path, "$.g.pre_tool_exec");
    assert!(errors[0].message.contains("never run"), "{diags:#?}");
}

#[test]
fn a_missing_group_wrapper_says_how_to_fix_it() {
    let (_, diags) = parse_str(r#"{"pre_tool_execution":[{"matcher":"*","hooks":[]}]}"#);
    let d = only(&diags);
    assert!(
        d.message
            .contains(r#"put it inside a named group, {"my-gate": {"pre_tool_execution": [...]}}"#),
        "{d}"
    );
}

#[test]
fn comment_keys_stay_warnings() {
    let (_, diags) = parse_str(
        r#"{"g":{"description":"audit","post_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"x"}]}]}}"#,
    );
    assert_eq!(only(&diags).severity, Severity::Warning);
}

#[test]
fn misspelt_on_failure_is_an_error() {
    let (_, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"x","on_falure":"deny"}]}]}}"#,
    );
    let d = only(&diags);
    assert_eq!(d.severity, Severity::Error);
    assert!(d.message.contains("fails open"), "{d}");
}

#[test]
fn alternation_typo_is_an_error_naming_the_alternative() {
    // `view_file|writefile` covered view_file only, and nothing was reported (#31).
    let (_, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"view_file|writefile","hooks":[{"type":"command","command":"x"}]}]}}"#,
    );
    let d = only(&diags);
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.path, "$.g.pre_tool_execution[0].matcher");
    assert!(
        d.message
            .contains(r#""writefile" (did you mean "write_to_file"?)"#),
        "{d}"
    );
    assert!(!d.message.contains(r#""view_file" ("#), "{d}");
}

#[test]
fn mcp_matchers_name_remote_tools_without_a_lint() {
    let (groups, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"mcp:docs/.*","hooks":[{"type":"command","command":"x"}]}]}}"#,
    );
    assert!(diags.is_empty(), "{diags:?}");
    assert!(
        groups[0].pre_tool_execution[0]
            .matcher
            .matches("mcp:docs/search")
    );
}

#[test]
fn misplaced_additional_context_is_explained() {
    let (_, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"x","additional_context":"y"}]}]}}"#,
    );
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(
        diags[0].message.contains("part of a hook's answer"),
        "{diags:?}"
    );
}

#[test]
fn misplaced_updated_args_are_explained() {
    let (_, diags) = parse_str(
        r#"{"g":{"post_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"x","updated_args":{"code":"y"}}]}]}}"#,
    );
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(
        diags[0].path,
        "$.g.post_tool_execution[0].hooks[0].updated_args"
    );
    assert!(
        diags[0]
            .message
            .contains("pre_tool_execution hook's answer")
    );
}

#[test]
fn unknown_keys_are_reported_with_a_suggestion() {
    let (groups, diags) = parse_str(
        r#"{"g":{"pre_tool_executon":[],"post_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"x","timout":3}]}]}}"#,
    );
    assert_eq!(groups.len(), 1);
    assert_eq!(diags.len(), 2, "{diags:#?}");
    assert!(
        diags[0]
            .message
            .contains("did you mean \"pre_tool_execution\"")
    );
    // A misspelt event loses its rules: an error. A misspelt timeout loses nothing (the
    // default applies): a warning.
    assert_eq!(diags[0].severity, Severity::Error);
    assert!(diags[1].message.contains("did you mean \"timeout\""));
    assert_eq!(diags[1].severity, Severity::Warning);
    assert_eq!(
        groups[0].post_tool_execution[0].handlers[0].timeout,
        DEFAULT_TIMEOUT
    );
}

#[test]
fn http_handler_headers_and_url_checks() {
    let (groups, diags) = parse_str(
        r#"{"g":{"post_tool_execution":[{"matcher":"*","hooks":[
            {"type":"http","url":"https://t.example/x","headers":{"X-Event-Source":"agent-sandbox","Bad Name":"v","X-N":5}},
            {"type":"http","url":"file:///etc/passwd"}
        ]}]}}"#,
    );
    let handlers = &groups[0].post_tool_execution[0].handlers;
    assert_eq!(handlers.len(), 1);
    assert_eq!(
        handlers[0].kind,
        HandlerKind::Http {
            url: "https://t.example/x".into(),
            headers: vec![("X-Event-Source".into(), "agent-sandbox".into())],
            allowed_env_vars: Vec::new(),
        }
    );
    assert_eq!(diags.len(), 3, "{diags:#?}");
}

#[test]
fn huge_timeouts_are_clamped() {
    let (groups, diags) = parse_str(
        r#"{"g":{"pre_tool_execution":[{"matcher":"*","hooks":[{"type":"command","command":"x","timeout":1e300}]}]}}"#,
    );
    assert_eq!(
        groups[0].pre_tool_execution[0].handlers[0].timeout,
        MAX_TIMEOUT
    );
    assert_eq!(only(&diags).severity, Severity::Warning);
}
