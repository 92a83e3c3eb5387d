//! Pages of a listing, the same on both backends: a page token is the position (SQLite's
//! `rowid`, PostgreSQL's `seq` identity column) of the last row served, and one row more than
//! the page is fetched to learn whether another page follows.

use crate::error::Result;

/// A page request: `size` items after `token` (an opaque token from the previous page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    pub size: Option<u32>,
    pub token: Option<String>,
}

impl Page {
    /// Default page size.
    pub const DEFAULT_SIZE: u32 = 50;
    /// Largest page served.
    pub const MAX_SIZE: u32 = 1000;

    /// The effective page size.
    pub fn limit(&self) -> u32 {
        self.size
            .filter(|s| *s > 0)
            .unwrap_or(Self::DEFAULT_SIZE)
            .min(Self::MAX_SIZE)
    }

    /// The position an oldest-first page continues after (0: the first page).
    pub(crate) fn after(&self) -> i64 {
        self.position().unwrap_or(0)
    }

    /// The position a newest-first page continues before (`i64::MAX`: the first page).
    pub(crate) fn before(&self) -> i64 {
        self.position().unwrap_or(i64::MAX)
    }

    /// How many rows to fetch: the page and one more, which only says whether a next page
    /// exists.
    pub(crate) fn fetch(&self) -> i64 {
        i64::from(self.limit()) + 1
    }

    fn position(&self) -> Option<i64> {
        self.token.as_deref().and_then(|t| t.parse::<i64>().ok())
    }
}

/// One page of results and the token for the next one.
#[derive(Debug, Clone, PartialEq)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub next_page_token: Option<String>,
}

impl<T> Paged<T> {
    /// The page of `page` out of rows fetched with [`Page::fetch`] as their limit, each with its
    /// position: the token is the last served row's position when a row was left over.
    pub(crate) fn from_rows(
        rows: impl IntoIterator<Item = Result<(i64, T)>>,
        page: &Page,
    ) -> Result<Self> {
        let limit = usize::try_from(page.limit()).unwrap_or(usize::MAX);
        let mut rows = rows.into_iter().collect::<Result<Vec<_>>>()?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next_page_token = if more {
            rows.last().map(|(position, _)| position.to_string())
        } else {
            None
        };
        Ok(Paged {
            items: rows.into_iter().map(|(_, item)| item).collect(),
            next_page_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(size: u32, token: Option<&str>) -> Page {
        Page {
            size: Some(size),
            token: token.map(Into::into),
        }
    }

    #[test]
    fn a_leftover_row_gives_the_last_served_position_as_the_token() {
        let rows = |n: i64| (1..=n).map(|p| Ok((p * 10, p)));
        let full = Paged::from_rows(rows(3), &page(2, None)).unwrap();
        assert_eq!(full.items, [1, 2]);
        assert_eq!(full.next_page_token.as_deref(), Some("20"));
        let last = Paged::from_rows(rows(2), &page(2, Some("20"))).unwrap();
        assert_eq!((last.items.len(), last.next_page_token), (2, None));
        assert_eq!(page(2, Some("20")).after(), 20);
        assert_eq!(page(2, Some("junk")).before(), i64::MAX);
        assert_eq!(page(0, None).fetch(), i64::from(Page::DEFAULT_SIZE) + 1);
    }
}
