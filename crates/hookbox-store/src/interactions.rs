//! Interactions as stored, for both backends: a row per interaction (its JSON body and the
//! columns that change over its life: status, usage, errors, `updated`) and a row per step.
//! What is decided here: how an interaction is serialised before a connection is taken
//! ([`NewInteraction`]), how a row is read back ([`from_row`]), and the errors an interaction
//! fails with when nothing can still run it.

use hookbox_protocol::api::{Interaction, InteractionError, InteractionStatus, Usage};

use crate::error::Result;
use crate::row::Columns;

/// Which interactions a listing returns (all given conditions hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InteractionFilter {
    pub status: Option<String>,
    pub agent: Option<String>,
    pub environment_id: Option<String>,
    /// RFC 3339; created at or after.
    pub created_after: Option<String>,
    /// RFC 3339; created before.
    pub created_before: Option<String>,
    /// Only the continuations of this interaction (their `previous_interaction_id`).
    pub previous_interaction_id: Option<String>,
}

/// How an interaction ended (or changed state).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    pub status: InteractionStatus,
    pub usage: Option<Usage>,
    pub errors: Vec<InteractionError>,
    /// RFC 3339.
    pub updated: String,
}

impl StatusUpdate {
    /// The update's usage (unchanged when `None`) and errors as stored: JSON.
    pub(crate) fn columns(&self) -> Result<(Option<String>, String)> {
        Ok((
            self.usage.as_ref().map(serde_json::to_string).transpose()?,
            serde_json::to_string(&self.errors)?,
        ))
    }
}

/// The columns [`from_row`] reads, in its order.
pub(crate) const COLUMNS: &str = "status, updated, usage_json, errors_json, body_json, hooks_json";

/// The interaction hooks' trace as stored after `patch` (its top-level keys replace the
/// stored ones): the `hooks_json` column's new value, from its old one.
pub(crate) fn merged_hooks(
    stored: Option<&str>,
    patch: &serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let mut hooks = match stored {
        Some(json) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(json)?,
        None => serde_json::Map::new(),
    };
    for (key, value) in patch {
        hooks.insert(key.clone(), value.clone());
    }
    Ok(serde_json::to_string(&hooks)?)
}

/// An interaction row ([`COLUMNS`]): its stored body with the columns that change over its
/// life; without its steps.
pub(crate) fn from_row(r: &impl Columns) -> Result<Interaction> {
    let mut interaction: Interaction = r.json(4)?;
    interaction.status = InteractionStatus::parse(&r.text(0)?).unwrap_or(InteractionStatus::Failed);
    interaction.updated = Some(r.text(1)?);
    interaction.usage = r
        .opt_text(2)?
        .map(|u| serde_json::from_str::<Usage>(&u))
        .transpose()?;
    interaction.errors = r.json::<Vec<InteractionError>>(3)?;
    // Only what the server recorded (rows from before the column have none).
    interaction.hooks = r
        .opt_text(5)?
        .map(|h| serde_json::from_str::<serde_json::Value>(&h))
        .transpose()?;
    Ok(interaction)
}

/// An interaction as listed: [`from_row`] without its input and hooks' trace (as steps, only
/// `get` has them).
pub(crate) fn listed_from_row(r: &impl Columns) -> Result<Interaction> {
    let mut interaction = from_row(r)?;
    interaction.input = None;
    interaction.hooks = None;
    Ok(interaction)
}

/// The errors (JSON) of interactions failed because nothing can still run them: `code` is
/// `interrupted` (a restart) or `replica_stopped` (reaped).
pub(crate) fn failure(code: &str, reason: &str) -> Result<String> {
    Ok(serde_json::to_string(&[InteractionError {
        code: code.into(),
        message: reason.to_owned(),
    }])?)
}

/// An interaction to insert, serialised before a connection is taken.
pub(crate) struct NewInteraction {
    /// The interaction without its steps.
    pub body: Interaction,
    pub body_json: String,
    pub usage: Option<String>,
    pub errors: String,
    /// Each step's JSON, in order.
    pub steps: Vec<String>,
    /// `created` and `updated` when the interaction has none.
    now: String,
}

impl NewInteraction {
    pub(crate) fn of(interaction: &Interaction) -> Result<Self> {
        let mut body = interaction.clone();
        let steps = std::mem::take(&mut body.steps);
        Ok(NewInteraction {
            body_json: serde_json::to_string(&body)?,
            usage: body.usage.as_ref().map(serde_json::to_string).transpose()?,
            errors: serde_json::to_string(&body.errors)?,
            steps: steps
                .iter()
                .map(serde_json::to_string)
                .collect::<std::result::Result<Vec<_>, _>>()?,
            body,
            now: crate::time::now_rfc3339(),
        })
    }

    pub(crate) fn created(&self) -> &str {
        self.body.created.as_deref().unwrap_or(&self.now)
    }

    pub(crate) fn updated(&self) -> &str {
        self.body.updated.as_deref().unwrap_or(&self.now)
    }
}
