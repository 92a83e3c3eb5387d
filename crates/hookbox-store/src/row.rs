//! One result row of either backend, read by column index ([`Columns`]): what lets every
//! row → record mapping be written once, beside its record, for both databases. The backends'
//! differences stay here: SQLite's integers are all 64-bit, PostgreSQL's `INTEGER` columns are
//! 32-bit, and a column of the wrong type is an error, never a panic.

use serde::de::DeserializeOwned;

use crate::error::Result;

/// The columns of one row, by index.
pub(crate) trait Columns {
    fn text(&self, i: usize) -> Result<String>;
    fn opt_text(&self, i: usize) -> Result<Option<String>>;
    fn int(&self, i: usize) -> Result<i64>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>>;
    fn bytes(&self, i: usize) -> Result<Vec<u8>>;

    /// A text column holding JSON, parsed.
    fn json<T: DeserializeOwned>(&self, i: usize) -> Result<T> {
        Ok(serde_json::from_str(&self.text(i)?)?)
    }

    /// The same row with its first `n` columns skipped (a listing's position column, say).
    fn skip(&self, n: usize) -> Skip<'_, Self>
    where
        Self: Sized,
    {
        Skip { row: self, n }
    }
}

/// A row read from column `n` on ([`Columns::skip`]).
pub(crate) struct Skip<'a, R> {
    row: &'a R,
    n: usize,
}

impl<R: Columns> Columns for Skip<'_, R> {
    fn text(&self, i: usize) -> Result<String> {
        self.row.text(self.n + i)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.row.opt_text(self.n + i)
    }
    fn int(&self, i: usize) -> Result<i64> {
        self.row.int(self.n + i)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.row.opt_int(self.n + i)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        self.row.bytes(self.n + i)
    }
}

impl Columns for rusqlite::Row<'_> {
    fn text(&self, i: usize) -> Result<String> {
        Ok(self.get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        Ok(self.get(i)?)
    }
    fn int(&self, i: usize) -> Result<i64> {
        Ok(self.get(i)?)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.get(i)?)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        Ok(self.get(i)?)
    }
}

impl Columns for tokio_postgres::Row {
    fn text(&self, i: usize) -> Result<String> {
        Ok(self.try_get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        Ok(self.try_get(i)?)
    }
    fn int(&self, i: usize) -> Result<i64> {
        Ok(if int4(self, i) {
            i64::from(self.try_get::<_, i32>(i)?)
        } else {
            self.try_get(i)?
        })
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        Ok(if int4(self, i) {
            self.try_get::<_, Option<i32>>(i)?.map(i64::from)
        } else {
            self.try_get(i)?
        })
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        Ok(self.try_get(i)?)
    }
}

/// Whether column `i` is PostgreSQL's 32-bit `INTEGER`.
fn int4(row: &tokio_postgres::Row, i: usize) -> bool {
    row.columns()
        .get(i)
        .is_some_and(|c| *c.type_() == tokio_postgres::types::Type::INT4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sqlite_row_reads_by_index_skips_and_refuses_a_wrong_type() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let read = |r: &rusqlite::Row<'_>| -> Result<_> {
            let rest = r.skip(1);
            Ok((
                r.int(0)?,
                rest.text(0)?,
                rest.opt_text(1)?,
                rest.opt_int(2)?,
                rest.bytes(3)?,
                rest.json::<Vec<u32>>(4)?,
            ))
        };
        let row = conn
            .query_row_and_then("SELECT 7, 'a', NULL, 3, x'00ff', '[1,2]'", [], read)
            .unwrap();
        assert_eq!(
            row,
            (7, "a".into(), None, Some(3), vec![0, 255], vec![1, 2])
        );
        let wrong = conn.query_row_and_then("SELECT 'seven'", [], |r| r.int(0));
        assert!(matches!(wrong, Err(crate::error::Error::Sqlite(_))));
    }
}
