//! The engine's side of rules from other agent CLIs' hooks files: each vendor handler runs once
//! per vendor call its matcher and event accept, with the vendor's input, environment and answer
//! semantics ([`crate::dialect`]). Split from the dispatch loop in `mod.rs`, which calls
//! [`HookEngine::vendor_handler`] for a rule that carries a dialect.

use super::*;

impl HookEngine {
    /// Runs one handler of a rule from another agent CLI's hooks file: once for each vendor
    /// call the hookbox call is shown as (one per chunk of a several-chunk edit) that the
    /// vendor's matcher and event accept, with the vendor's input, environment and answer
    /// semantics (see [`crate::dialect`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn vendor_handler(
        &self,
        state: &mut State<'_>,
        event: HookEvent,
        subject: &str,
        tool: Option<ToolName>,
        group: &Group,
        rule: &Rule,
        vendor: &VendorRule,
        handler: &Handler,
    ) {
        let facts = state.payload.facts();
        let calls: Vec<Option<VendorCall>> = if event.is_tool_event() {
            let failed = facts.error.is_some();
            if !vendor.fires.applies(tool, failed) {
                return;
            }
            match dialect::tools::to_vendor(vendor.dialect, subject, &facts.args) {
                Ok(calls) => calls
                    .into_iter()
                    .filter(|c| vendor.matcher.matches(vendor.dialect, &c.tool_name))
                    .map(Some)
                    .collect(),
                // Arguments the mapping cannot read: the tool will refuse them too.
                Err(_) => Vec::new(),
            }
        } else {
            vec![None]
        };
        // Claude Code's `if`: the handler runs only for calls its permission rule matches.
        let calls = calls.into_iter().filter(|call| match &handler.condition {
            None => true,
            Some(Ok(rule)) => call
                .as_ref()
                .is_some_and(|c| rule.matches(&c.tool_name, &c.tool_input)),
            Some(Err(_)) => false,
        });
        for call in calls {
            let vendor_trace = |meaning: String| VendorTrace {
                dialect: vendor.dialect,
                event: vendor.event_name.clone(),
                tool_name: call.as_ref().map(|c| c.tool_name.clone()),
                chunk: call.as_ref().and_then(|c| c.chunk),
                meaning,
            };
            let skipped = |outcome: Outcome, meaning: &str| {
                let mut entry = trace_entry(group, rule, handler, outcome, None, Instant::now());
                entry.vendor = Some(vendor_trace(meaning.to_owned()));
                entry
            };
            if !group.enabled {
                state.trace.push(skipped(
                    Outcome::Disabled,
                    "hooks of this file are switched off",
                ));
                continue;
            }
            if matches!(state.decision, Decision::Deny { .. }) {
                state
                    .trace
                    .push(skipped(Outcome::Skipped, "an earlier handler denied"));
                continue;
            }
            let key = (
                handler.kind.type_name(),
                handler.kind.target().to_owned(),
                call.as_ref().and_then(|c| c.chunk),
            );
            if let Some((_, first)) = state.ran_vendor.iter().find(|(k, _)| *k == key) {
                let mut entry = skipped(
                    Outcome::Skipped,
                    "the same handler already ran for this call",
                );
                entry.warning = Some(format!(
                    "already ran from {first}; a handler reached through two files runs once"
                ));
                state.trace.push(entry);
                continue;
            }
            state.ran_vendor.push((key, group.file.clone()));

            let facts = state.payload.facts();
            let moment = dialect::payload::Moment {
                environment_id: &facts.environment_id,
                interaction_id: facts.interaction_id.as_deref(),
                call_key: &facts.args.to_string(),
                error: facts.error.as_deref(),
                prompt: facts.prompt.as_deref(),
                output: facts.output.as_deref(),
                status: facts.status.as_deref(),
                tool_output: state.extras.tool_output.as_ref(),
                file_content: state.extras.file_content.as_deref(),
            };
            let mut input = dialect::payload::write(
                vendor.dialect,
                vendor.style,
                &vendor.event_name,
                event,
                call.as_ref(),
                &moment,
            );
            // Only a command handler has the transcript file; an http receiver gets null.
            if !matches!(handler.kind, HandlerKind::Command { .. })
                && let Some(path) = input.get_mut("transcript_path")
            {
                *path = serde_json::Value::Null;
            }
            let session = facts
                .interaction_id
                .clone()
                .unwrap_or_else(|| facts.environment_id.clone());
            let handler_started = Instant::now();
            let span = handler_span(event, subject, group);
            let (raw, mut stderr) = tracing::Instrument::instrument(
                self.run_vendor(vendor, handler, &input, &session, &state.extras.transcript),
                span.clone(),
            )
            .await;
            let answer = match raw {
                Ok((termination, stdout, stderr_bytes)) => dialect::answer_in::read(
                    vendor.dialect,
                    event,
                    &vendor.event_name,
                    &dialect::answer_in::Raw {
                        termination,
                        stdout: &stdout,
                        stderr: &stderr_bytes,
                    },
                    call.as_ref().map(|c| &c.tool_input),
                    millis(handler.timeout),
                    self.output_limit,
                ),
                Err(failure) => dialect::answer_in::VendorAnswer {
                    meaning: format!("{failure}: {} lets the call proceed", vendor.dialect),
                    verdict: VendorVerdict::Failed(failure),
                    context: None,
                },
            };
            let fail_closed = handler.on_failure == OnFailure::Deny;
            let failed = |failure| match fail_closed {
                true => Outcome::FailedClosed { failure },
                false => Outcome::FailedOpen { failure },
            };
            let mut warning = None;
            let outcome = match (event.decides(), answer.verdict) {
                (true, VendorVerdict::Failed(failure)) => failed(failure),
                (false, VendorVerdict::Failed(failure)) => Outcome::Failed { failure },
                (false, _) => Outcome::Completed,
                (true, VendorVerdict::Allow) => Outcome::Allow,
                (true, VendorVerdict::Deny(reason)) => Outcome::Deny { reason },
                (true, VendorVerdict::Ask(reason)) if event.is_tool_event() => {
                    Outcome::Ask { reason }
                }
                (true, VendorVerdict::Ask(_)) => failed(Failure::NotADecision {
                    excerpt: format!("an ask is honoured only before a tool call, not {event}"),
                }),
                (true, VendorVerdict::Update(new_input)) => match (&call, event.is_tool_event()) {
                    (Some(shown), true) => {
                        match dialect::tools::update_from_vendor(
                            vendor.dialect,
                            subject,
                            &facts.args,
                            shown,
                            &new_input,
                        ) {
                            Ok(args) if args == facts.args => Outcome::Allow,
                            Ok(args) => match self.validate(tool, &args) {
                                Ok(()) => Outcome::AllowUpdated { updated_args: args },
                                Err(reason) => Outcome::InvalidUpdate {
                                    updated_args: args,
                                    reason,
                                },
                            },
                            Err(err) => Outcome::InvalidUpdate {
                                updated_args: new_input,
                                reason: err.to_string(),
                            },
                        }
                    }
                    _ => {
                        warning = Some(
                            "a rewrite is honoured only before a tool call; ignored".to_owned(),
                        );
                        Outcome::Allow
                    }
                },
            };
            let mut context = answer.context;
            let mut outcome = outcome;
            self.scrub(&mut outcome, [&mut stderr, &mut warning, &mut context]);
            let mut entry = trace_entry(group, rule, handler, outcome, stderr, handler_started);
            entry.warning = warning;
            entry.additional_context = context;
            entry.vendor = Some(vendor_trace(answer.meaning));
            state.record(&span, event, subject, group, rule, handler, entry);
        }
    }

    /// Runs a vendor handler: `Ok((how it ended, stdout, stderr))`, or why it could not run.
    /// Also returns a stderr excerpt for the trace.
    async fn run_vendor(
        &self,
        vendor: &VendorRule,
        handler: &Handler,
        input: &serde_json::Value,
        session: &str,
        transcript: &[u8],
    ) -> (
        Result<(Termination, Vec<u8>, Vec<u8>), Failure>,
        Option<String>,
    ) {
        // Serialising a JSON value cannot fail; an empty body would still fail open safely.
        let body = serde_json::to_vec(input).unwrap_or_default();
        match &handler.kind {
            HandlerKind::Command { command } => {
                let vars = dialect::payload::env(vendor.dialect, session);
                let command = dialect::payload::substitute(vendor.dialect, command, &vars);
                let mut exported: Vec<(String, String)> =
                    vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                exported.extend(vendor.env.iter().cloned());
                let mut line = dialect::payload::transcript_preamble(transcript);
                line.push_str(&dialect::payload::shell_line(
                    &command,
                    &exported,
                    vendor.cwd.as_deref(),
                ));
                let mut stdin = body;
                stdin.push(b'\n');
                let request = CommandRequest {
                    command: line,
                    stdin,
                    timeout: handler.timeout,
                    output_limit: self.output_limit,
                };
                match self.commands.run(request).await {
                    Ok(output) => {
                        let stderr = (!output.stderr.is_empty()).then(|| excerpt(&output.stderr));
                        (
                            Ok((output.termination, output.stdout, output.stderr)),
                            stderr,
                        )
                    }
                    Err(err) => (
                        Err(Failure::Spawn {
                            message: err.to_string(),
                        }),
                        None,
                    ),
                }
            }
            HandlerKind::Http {
                url,
                headers,
                allowed_env_vars,
            } => {
                // Claude Code: `$NAME` / `${NAME}` in a header value take the environment's
                // declared value of an allowed variable, empty otherwise; a value that would
                // carry a line break drops the header. Credentials are the egress's to inject.
                let headers: Vec<(String, String)> = headers
                    .iter()
                    .filter_map(|(name, value)| {
                        let value = interpolate_header(value, allowed_env_vars, &self.declared_env);
                        (!value.chars().any(|c| c.is_control() && c != '\t'))
                            .then(|| (name.clone(), value))
                    })
                    .collect();
                // Claude Code: only a 2xx answer with a JSON body can decide; it is read as a
                // command's stdout with exit 0.
                match self.run_http(url, &headers, handler, &body).await {
                    Ok(body) => (Ok((Termination::Exited(0), body, Vec::new())), None),
                    Err(failure) => (Err(failure), None),
                }
            }
            HandlerKind::Unsupported { type_name, .. } => (
                Err(Failure::Unsupported {
                    handler_type: (*type_name).to_owned(),
                }),
                None,
            ),
        }
    }
}
