//! A trigger's schedule: a five-field cron expression (`croner`) read in an IANA time zone
//! (`chrono-tz`), and the next run after an instant. Daylight-saving changes follow croner: a
//! local time that does not exist (spring forward) runs at the first instant after the gap, and
//! one that exists twice (fall back) runs once, at its first occurrence.

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;

/// A schedule or zone that cannot be used, naming the field for the 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "Invalid `schedule` `{schedule}`: {why} (five fields: minute hour day-of-month month day-of-week, e.g. `0 9 * * 1-5`)."
    )]
    Schedule { schedule: String, why: String },
    #[error(
        "Invalid `time_zone` `{0}`: not an IANA time zone (e.g. `Europe/Berlin`, `America/New_York`, `UTC`)."
    )]
    TimeZone(String),
}

/// A parsed schedule in its zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: croner::Cron,
    tz: Tz,
}

impl Schedule {
    pub fn parse(schedule: &str, time_zone: &str) -> Result<Self, ScheduleError> {
        let bad = |why: String| ScheduleError::Schedule {
            schedule: schedule.to_owned(),
            why,
        };
        if schedule.len() > 256 {
            return Err(bad("longer than 256 characters".into()));
        }
        let fields = schedule.split_whitespace().count();
        if fields != 5 {
            return Err(bad(format!("{fields} fields")));
        }
        let cron = croner::Cron::new(schedule)
            .with_dom_and_dow()
            .parse()
            .map_err(|e| bad(e.to_string()))?;
        let tz: Tz = time_zone
            .parse()
            .map_err(|_| ScheduleError::TimeZone(time_zone.to_owned()))?;
        Ok(Self { cron, tz })
    }

    /// The first run strictly after `after_ms` (unix milliseconds), if there is one.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let after = Utc
            .timestamp_millis_opt(after_ms)
            .single()?
            .with_timezone(&self.tz);
        let next = self.cron.find_next_occurrence(&after, false).ok()?;
        Some(next.timestamp_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc_ms(text: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    fn runs(schedule: &Schedule, from: &str, n: usize) -> Vec<String> {
        let mut at = utc_ms(from);
        (0..n)
            .map(|_| {
                at = schedule.next_after(at).unwrap();
                chrono::DateTime::from_timestamp_millis(at)
                    .unwrap()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            })
            .collect()
    }

    #[test]
    fn bad_schedules_and_zones_are_named() {
        for bad in ["", "* * * *", "* * * * * *", "61 * * * *", "every day"] {
            assert!(
                matches!(
                    Schedule::parse(bad, "UTC"),
                    Err(ScheduleError::Schedule { .. })
                ),
                "{bad}"
            );
        }
        let err = Schedule::parse("0 9 * * *", "Mars/Olympus").unwrap_err();
        assert!(err.to_string().contains("`time_zone`"), "{err}");
        assert!(Schedule::parse("0 9 * * 1-5", "America/New_York").is_ok());
    }

    /// 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer; the clocks went forward
    /// on 2026-03-29.
    #[test]
    fn a_daily_run_keeps_its_local_time_across_the_spring_change() {
        let s = Schedule::parse("0 9 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            runs(&s, "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28T08:00:00Z",
                "2026-03-29T07:00:00Z",
                "2026-03-30T07:00:00Z"
            ]
        );
    }

    /// 02:30 does not exist in Berlin on 2026-03-29 and exists twice on 2026-10-25: it runs
    /// once each day all the same.
    #[test]
    fn a_run_in_the_missing_or_repeated_hour_runs_once() {
        let s = Schedule::parse("30 2 * * *", "Europe/Berlin").unwrap();
        let spring = runs(&s, "2026-03-28T12:00:00Z", 2);
        assert_eq!(spring[0], "2026-03-29T01:00:00Z"); // 03:00 CEST, right after the gap
        assert_eq!(spring[1], "2026-03-30T00:30:00Z");
        let autumn = runs(&s, "2026-10-24T12:00:00Z", 2);
        assert_eq!(autumn, ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]);
    }

    #[test]
    fn every_five_minutes_in_utc() {
        let s = Schedule::parse("*/5 * * * *", "UTC").unwrap();
        assert_eq!(
            runs(&s, "2026-12-04T10:02:59Z", 2),
            ["2026-12-04T10:05:00Z", "2026-12-04T10:10:00Z"]
        );
    }
}
