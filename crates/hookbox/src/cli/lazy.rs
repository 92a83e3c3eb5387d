//! Subcommands whose arguments clap defines only when it parses that subcommand.
//!
//! Defining every subcommand's arguments was most of what `hookbox tool` and `hooks test` spent
//! parsing (0.38 of 0.55 ms, on a run that takes about 9 ms in all), all of it for subcommands
//! other than the one run. [`Lazy`] wraps a subcommand's arguments (`Args`) and [`LazySub`] its
//! own subcommands (`Subcommand`) so that clap's derive names the subcommand and its help line
//! as before, and its arguments are added by [`clap::Command::defer`] when clap builds that
//! subcommand: when it is the one parsed, or when `hookbox help` shows it (clap runs a
//! command's deferred definition once, when it builds it: a definition must not defer again,
//! which is why these wrap only what clap's derive defines at once). The generated
//! completions and man pages read the whole tree: [`eager`] turns the deferring off for them.
//! What the user sees is the same: a subcommand keeps its own help line where its arguments'
//! definition would set another (a flattened group's doc comment), as it did when clap's derive
//! set it after them.

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether [`Lazy`] and [`LazySub`] defer (the default) or define at once ([`eager`]).
static DEFER: AtomicBool = AtomicBool::new(true);

/// Makes every later definition of the command tree whole at once, as clap's derive alone would
/// (for `hookbox completions` and `hookbox manpage`, which read every subcommand).
pub fn eager() {
    set_defer(false);
}

fn set_defer(on: bool) {
    DEFER.store(on, Ordering::Relaxed);
}

/// `define` applied to `cmd` now, or when clap builds `cmd` (see the module doc).
fn later(cmd: clap::Command, define: fn(clap::Command) -> clap::Command) -> clap::Command {
    if DEFER.load(Ordering::Relaxed) {
        cmd.defer(define)
    } else {
        define(cmd)
    }
}

/// `define` applied to `cmd`, keeping the help lines clap's derive gave `cmd` from its variant's
/// doc comment: the derive sets them after the arguments' definition, so over whatever that
/// sets (a one-paragraph doc comment clears `long_about`). A variant without one has no
/// `about`, and then what the definition sets stays, as it would have.
fn keeping_about(cmd: clap::Command, define: fn(clap::Command) -> clap::Command) -> clap::Command {
    let Some(about) = cmd.get_about().cloned() else {
        return define(cmd);
    };
    let long_about = resettable(cmd.get_long_about());
    define(cmd).about(about).long_about(long_about)
}

/// `text` to set again, or nothing (which clears what was set meanwhile).
fn resettable(
    text: Option<&clap::builder::StyledStr>,
) -> clap::builder::Resettable<clap::builder::StyledStr> {
    match text {
        Some(text) => clap::builder::Resettable::Value(text.clone()),
        None => clap::builder::Resettable::Reset,
    }
}

/// A subcommand's arguments (`T: Args`), defined when clap builds that subcommand.
#[derive(Debug)]
pub struct Lazy<T>(pub T);

impl<T: clap::Args> clap::Args for Lazy<T> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        later(cmd, |cmd| keeping_about(cmd, T::augment_args))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        later(cmd, |cmd| keeping_about(cmd, T::augment_args_for_update))
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}

/// `FromArgMatches` of a wrapper: the wrapped type's, wrapped.
macro_rules! from_arg_matches_of_the_wrapped {
    ($wrapper:ident) => {
        impl<T: clap::FromArgMatches> clap::FromArgMatches for $wrapper<T> {
            fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
                T::from_arg_matches(matches).map($wrapper)
            }

            fn from_arg_matches_mut(matches: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
                T::from_arg_matches_mut(matches).map($wrapper)
            }

            fn update_from_arg_matches(
                &mut self,
                matches: &clap::ArgMatches,
            ) -> Result<(), clap::Error> {
                self.0.update_from_arg_matches(matches)
            }

            fn update_from_arg_matches_mut(
                &mut self,
                matches: &mut clap::ArgMatches,
            ) -> Result<(), clap::Error> {
                self.0.update_from_arg_matches_mut(matches)
            }
        }
    };
}

from_arg_matches_of_the_wrapped!(Lazy);

/// A subcommand's own subcommands (`T: Subcommand`), defined when clap builds that subcommand.
#[derive(Debug)]
pub struct LazySub<T>(pub T);

impl<T: clap::Subcommand> clap::Subcommand for LazySub<T> {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        later(cmd, |cmd| keeping_about(cmd, T::augment_subcommands))
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        later(cmd, |cmd| {
            keeping_about(cmd, T::augment_subcommands_for_update)
        })
    }

    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}

from_arg_matches_of_the_wrapped!(LazySub);

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Each subcommand's name, arguments and whole `--help`, depth first (without clap's
    /// generated `help` subcommands, which mirror the tree as it was when their parent was
    /// built).
    fn outline(cmd: &mut clap::Command, path: &str, out: &mut Vec<String>) {
        let mut args: Vec<String> = cmd
            .get_arguments()
            .map(|a| {
                format!(
                    "{}:{:?}:{:?}:{}",
                    a.get_id(),
                    a.get_long(),
                    a.get_short(),
                    a.is_global_set()
                )
            })
            .collect();
        // Global arguments are added to a deferred subcommand before its own (no change to its
        // help, which orders them itself).
        args.sort();
        out.push(format!("{path}\n{args:?}\n{}", cmd.render_long_help()));
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_owned())
            .filter(|name| name != "help")
            .collect();
        for name in names {
            let sub = cmd.find_subcommand_mut(&name).unwrap();
            outline(sub, &format!("{path} {name}"), out);
        }
    }

    fn tree(defer: bool) -> Vec<String> {
        super::set_defer(defer);
        let mut command = super::super::Cli::command();
        // Building the whole tree runs every deferred definition.
        command.build();
        super::set_defer(true);
        let mut out = Vec::new();
        outline(&mut command, "hookbox", &mut out);
        out
    }

    #[test]
    fn every_deferred_subcommand_is_defined_as_clap_defines_it_at_once() {
        let (deferred, at_once) = (tree(true), tree(false));
        assert!(at_once.len() > 25, "{at_once:?}");
        for (d, a) in deferred.iter().zip(&at_once) {
            assert_eq!(d, a);
        }
        assert_eq!(deferred.len(), at_once.len());
    }
}
