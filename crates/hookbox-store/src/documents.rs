//! Tables that hold one JSON document per (project, id) — environments, agents, and triggers
//! for reading — named once for both backends. Each backend reads and writes them with its own
//! SQL (`sqlite/documents.rs`, `postgres/documents.rs`).

/// A table holding one JSON document per (project, id). Names are constants of this module,
/// never input, so formatting them into SQL is safe.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DocTable {
    pub table: &'static str,
    pub column: &'static str,
}

pub(crate) const ENVIRONMENTS: DocTable = DocTable {
    table: "environments",
    column: "record_json",
};
pub(crate) const AGENTS: DocTable = DocTable {
    table: "agents",
    column: "agent_json",
};
/// Read and listed as documents; written with its status and next run as columns too, for the
/// scheduler's query (each backend's `triggers.rs`).
pub(crate) const TRIGGERS: DocTable = DocTable {
    table: "triggers",
    column: "record_json",
};
