//! `hookbox tool ENV_ID NAME --args JSON`: one tool call through the environment's hooks, printing
//! the result and the hook trace as JSON. Also the hidden launcher subcommand.

use super::output::{outln, unless_reader_gone};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use hookbox_environments::lifecycle::ToolResult;
use hookbox_protocol::{ToolCall, ToolName};

use super::env::{EgressArgs, StoreArgs};

#[derive(Debug, Args)]
pub struct ToolArgs {
    /// The environment (`env_...`).
    pub env_id: String,
    /// code_execution, view_file, write_to_file, replace_file_content, list_dir or delete_file.
    pub name: ToolName,
    /// The tool's arguments as a JSON object, or `@FILE`.
    #[arg(long, value_name = "JSON|@FILE", default_value = "{}")]
    pub args: String,
    /// Wall-clock limit for code_execution, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub egress: EgressArgs,
}

/// Exit status: 0 when the tool ran, 1 when it failed, 2 when a pre hook denied it, 3 when a pre
/// hook asks a person to approve it (the call did not run; approvals need `hookbox serve`), 64
/// for a usage error. A denied or asked call also says so in one line on stderr. A reader of stdout
/// that went away (`| head`) changes none of these.
pub fn run(args: ToolArgs) -> anyhow::Result<ExitCode> {
    let call_args = super::args::json_arg("--args", &args.args)?;
    if !call_args.is_object() {
        return Err(super::usage(
            "--args must be a JSON object, like '{\"path\": \"/workspace/a.txt\"}'",
        ));
    }
    // code_execution runs in the environment's sandbox: its launcher starts while the
    // environment is opened (the other tools launch only for command hooks).
    let store = args.store.open_with(
        Some(Duration::from_secs(args.timeout)),
        args.egress.operator(),
        true,
        args.name == ToolName::CodeExecution,
    )?;
    let env = args.store.located(store.open_env(&args.env_id))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(env.call_tool(ToolCall {
        name: args.name,
        args: call_args,
    }));
    // The call ran (or was refused) whether or not anyone reads the result: a reader that went
    // away (`| head`) leaves the exit status that of the call.
    unless_reader_gone(outln!("{}", serde_json::to_string_pretty(&outcome)?))?;
    Ok(match &outcome.result {
        ToolResult::Ok { .. } => ExitCode::SUCCESS,
        ToolResult::Error { .. } => ExitCode::FAILURE,
        ToolResult::Denied { reason } => {
            eprintln!("hookbox: {} denied by a pre hook: {reason}", args.name);
            ExitCode::from(super::exit::DENIED)
        }
        // A hook asks a person; there is nobody to ask here, so the call did not run.
        ToolResult::NeedsApproval { reason, group } => {
            eprintln!(
                "hookbox: {} not run: group {group} asks a person to approve it ({reason}); approvals need `hookbox serve`",
                args.name
            );
            ExitCode::from(super::exit::ASKED)
        }
    })
}

/// `hookbox __sandbox-exec`: become the sandbox launcher (see hookbox_sandbox::launcher).
pub fn sandbox_exec() -> ! {
    std::process::exit(hookbox_sandbox::launcher_main())
}
