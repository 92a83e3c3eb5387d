//! A trigger's schedule: a five-field cron expression (`croner`) read in an IANA time zone, and
//! the next run after an instant. Daylight-saving changes follow croner: a local time that does
//! not exist (spring forward) runs at the first instant after the gap, and one that exists twice
//! (fall back) runs once, at its first occurrence.
//!
//! Zones come from `jiff`'s copy of the IANA database bundled in the binary (never the host's
//! zoneinfo files: the same answer on every machine, and no file is opened for a client-given
//! name), seen by croner through [`Zone`], a small `chrono::TimeZone`. `jiff` keeps the database
//! as compact binary TZif data; `chrono-tz`, used before, compiled every zone into static tables
//! of `&'static str` whose relocations every hookbox process paid for at start.

use std::fmt;

use chrono::{
    FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, NaiveTime, Offset as _, TimeZone, Utc,
};

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
    tz: Zone,
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
        let tz =
            Zone::named(time_zone).ok_or_else(|| ScheduleError::TimeZone(time_zone.to_owned()))?;
        Ok(Self { cron, tz })
    }

    /// The first run strictly after `after_ms` (unix milliseconds), if there is one.
    ///
    /// In the hour that repeats when the clocks go back, croner maps a local time to its first
    /// occurrence, which may lie before `after_ms` (asked at 02:15 the second time round, a
    /// `30 2 * * *` schedule answers 02:30 the first time round). Such a run already had its
    /// turn: the search goes on from that local time's second occurrence, until a run after
    /// `after_ms` (each step moves past one local time; bounded).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let mut from = Utc
            .timestamp_millis_opt(after_ms)
            .single()?
            .with_timezone(&self.tz);
        for _ in 0..FOLD_STEPS {
            let next = self.cron.find_next_occurrence(&from, false).ok()?;
            let next_ms = next.timestamp_millis();
            if next_ms > after_ms {
                return Some(next_ms);
            }
            let later = match self.tz.from_local_datetime(&next.naive_local()) {
                chrono::MappedLocalTime::Ambiguous(_, later) => later,
                _ => next,
            };
            // Always forward, even if the zone did not say "twice" for this local time.
            from = if later > from {
                later
            } else {
                from + chrono::TimeDelta::seconds(1)
            };
        }
        None
    }
}

/// How many runs in a repeated hour [`Schedule::next_after`] steps past at most: one a minute
/// for the longest fold (two hours), and then some.
const FOLD_STEPS: usize = 256;

/// An IANA time zone from the bundled database, as a `chrono::TimeZone` for croner.
#[derive(Debug, Clone)]
pub struct Zone(jiff::tz::TimeZone);

impl Zone {
    /// The zone named exactly `name` (a zone or a link such as `US/Eastern` or `UTC`). Names are
    /// case-sensitive, as they were with `chrono-tz`: the database's own lookup ignores case, so
    /// a name is accepted only if it is spelled as one of the database's names. `Factory` (a
    /// placeholder, not a place; `chrono-tz` did not have it) is the one name refused on top.
    pub fn named(name: &str) -> Option<Self> {
        // The database's names, sorted, read once: listing them copies each (~600) into a new
        // `String`, and a schedule is parsed per request and per due trigger.
        static NAMES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
            let mut names: Vec<String> = jiff::tz::TimeZoneDatabase::bundled()
                .available()
                .map(|name| name.as_str().to_owned())
                .collect();
            names.sort_unstable();
            names
        });
        if name == "Factory" || NAMES.binary_search_by(|n| n.as_str().cmp(name)).is_err() {
            return None;
        }
        jiff::tz::TimeZoneDatabase::bundled()
            .get(name)
            .ok()
            .map(Self)
    }

    fn at(&self, offset: jiff::tz::Offset) -> ZoneOffset {
        ZoneOffset {
            zone: self.clone(),
            fixed: FixedOffset::east_opt(offset.seconds()).unwrap_or_else(|| Utc.fix()),
        }
    }
}

/// A zone's offset at one instant: the zone (so a `DateTime<Zone>` keeps its zone) and the
/// fixed offset from UTC in force then.
#[derive(Debug, Clone)]
pub struct ZoneOffset {
    zone: Zone,
    fixed: FixedOffset,
}

impl chrono::Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl TimeZone for Zone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Self {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<ZoneOffset> {
        self.offset_from_local_datetime(&local.and_time(NaiveTime::MIN))
    }

    /// Local time to offset: one offset, none in a gap (spring forward), or the earlier and
    /// the later instant in a fold (fall back), as chrono expects.
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<ZoneOffset> {
        use chrono::{Datelike, Timelike};
        use jiff::tz::AmbiguousOffset;
        let civil = (|| {
            jiff::civil::DateTime::new(
                i16::try_from(local.year()).ok()?,
                i8::try_from(local.month()).ok()?,
                i8::try_from(local.day()).ok()?,
                i8::try_from(local.hour()).ok()?,
                i8::try_from(local.minute()).ok()?,
                i8::try_from(local.second()).ok()?,
                i32::try_from(local.nanosecond().min(999_999_999)).ok()?,
            )
            .ok()
        })();
        let Some(civil) = civil else {
            return MappedLocalTime::None;
        };
        match self.0.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => MappedLocalTime::Single(self.at(offset)),
            AmbiguousOffset::Gap { .. } => MappedLocalTime::None,
            AmbiguousOffset::Fold { before, after } => {
                MappedLocalTime::Ambiguous(self.at(before), self.at(after))
            }
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        self.offset_from_utc_datetime(&utc.and_time(NaiveTime::MIN))
    }

    /// The offset in force at a UTC instant (clamped to the range jiff covers, years -9999 to
    /// 9999; croner never looks past year 5000).
    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        let second = utc.and_utc().timestamp().clamp(
            jiff::Timestamp::MIN.as_second(),
            jiff::Timestamp::MAX.as_second(),
        );
        let at = jiff::Timestamp::from_second(second).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        self.at(self.0.to_offset(at))
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

    // Review: asked inside the repeated hour's second pass (02:15 CET, 01:15 UTC), the next run
    // was 02:30 CEST (00:30 UTC), before the instant asked about, so a trigger created, resumed
    // or caught up there had its next run in the past and fired at every tick until 01:30 UTC.
    #[test]
    fn asked_in_the_repeated_hour_the_next_run_is_never_in_the_past() {
        let daily = Schedule::parse("30 2 * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            runs(&daily, "2026-10-25T01:15:00Z", 1),
            ["2026-10-26T01:30:00Z"] // 02:30 ran at its first occurrence, 00:30 UTC
        );
        // Every ten minutes: the local times of the second pass already ran; 03:00 CET is new.
        let often = Schedule::parse("*/10 * * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            runs(&often, "2026-10-25T01:15:00Z", 2),
            ["2026-10-25T02:00:00Z", "2026-10-25T02:10:00Z"]
        );
        // Every minute, asked as the second pass begins: still forward, within the bound.
        let minutely = Schedule::parse("* * * * *", "Europe/Berlin").unwrap();
        assert_eq!(
            runs(&minutely, "2026-10-25T01:00:00Z", 1),
            ["2026-10-25T02:00:00Z"]
        );
        // Sydney's repeated hour (02:00-03:00 AEST on 2026-04-05, 16:00-17:00 UTC the day
        // before).
        let sydney = Schedule::parse("30 2 * * *", "Australia/Sydney").unwrap();
        assert_eq!(
            runs(&sydney, "2026-04-04T16:45:00Z", 1),
            ["2026-04-05T16:30:00Z"]
        );
    }

    #[test]
    fn every_five_minutes_in_utc() {
        let s = Schedule::parse("*/5 * * * *", "UTC").unwrap();
        assert_eq!(
            runs(&s, "2026-12-04T10:02:59Z", 2),
            ["2026-12-04T10:05:00Z", "2026-12-04T10:10:00Z"]
        );
    }

    /// Zone names are matched exactly, aliases included, as `chrono-tz` did: the database's
    /// own lookup ignores case, which must not widen what is accepted.
    #[test]
    fn zone_names_are_case_sensitive_and_aliases_are_accepted() {
        for good in [
            "UTC",
            "Etc/UTC",
            "GMT",
            "Zulu",
            "US/Eastern",
            "EST5EDT",
            "Europe/Kiev",
            "Europe/Kyiv",
            "Asia/Calcutta",
            "Australia/Adelaide",
        ] {
            assert!(Schedule::parse("0 9 * * *", good).is_ok(), "{good}");
        }
        for bad in [
            "europe/berlin",
            "EUROPE/BERLIN",
            "utc",
            "us/eastern",
            "Factory",
            "posixrules",
            "localtime",
            "/etc/localtime",
            "../../etc/passwd",
            "Europe/Berlin ",
            "",
        ] {
            let err = Schedule::parse("0 9 * * *", bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "Invalid `time_zone` `{bad}`: not an IANA time zone (e.g. `Europe/Berlin`, `America/New_York`, `UTC`)."
                )
            );
        }
    }

    /// Southern hemisphere: Sydney leaves summer time on 2026-04-05 (03:00 AEDT back to 02:00
    /// AEST, so 02:30 happens twice) and enters it on 2026-10-04 (02:00 AEST to 03:00 AEDT, so
    /// 02:30 does not exist). Values as `chrono-tz` gave them.
    #[test]
    fn southern_hemisphere_changes_run_once_each_day() {
        let s = Schedule::parse("30 2 * * *", "Australia/Sydney").unwrap();
        assert_eq!(
            runs(&s, "2026-04-03T12:00:00Z", 4),
            [
                "2026-04-03T15:30:00Z",
                "2026-04-04T15:30:00Z", // 02:30 AEDT, the first of the two
                "2026-04-05T16:30:00Z",
                "2026-04-06T16:30:00Z"
            ]
        );
        assert_eq!(
            runs(&s, "2026-10-02T12:00:00Z", 4),
            [
                "2026-10-02T16:30:00Z",
                "2026-10-03T16:00:00Z", // 03:00 AEDT, right after the gap
                "2026-10-04T15:30:00Z",
                "2026-10-05T15:30:00Z"
            ]
        );
        // Santiago's clocks go forward at midnight (2026-09-06 00:00 -04 to 01:00 -03).
        let s = Schedule::parse("0 0 * * *", "America/Santiago").unwrap();
        assert_eq!(
            runs(&s, "2026-09-04T12:00:00Z", 4),
            [
                "2026-09-05T04:00:00Z",
                "2026-09-06T04:00:00Z",
                "2026-09-07T03:00:00Z",
                "2026-09-08T03:00:00Z"
            ]
        );
    }

    /// Adelaide is UTC+9:30 in winter and +10:30 in summer; Kathmandu is +5:45 and Chatham
    /// +12:45/+13:45. Values as `chrono-tz` gave them.
    #[test]
    fn zones_with_part_hour_offsets() {
        let s = Schedule::parse("0 9 * * *", "Australia/Adelaide").unwrap();
        assert_eq!(
            runs(&s, "2026-04-03T12:00:00Z", 4),
            [
                "2026-04-03T22:30:00Z",
                "2026-04-04T23:30:00Z",
                "2026-04-05T23:30:00Z",
                "2026-04-06T23:30:00Z"
            ]
        );
        assert_eq!(
            runs(&s, "2026-10-02T12:00:00Z", 4),
            [
                "2026-10-02T23:30:00Z",
                "2026-10-03T22:30:00Z",
                "2026-10-04T22:30:00Z",
                "2026-10-05T22:30:00Z"
            ]
        );
        let s = Schedule::parse("30 2 * * *", "Australia/Adelaide").unwrap();
        assert_eq!(
            runs(&s, "2026-04-03T12:00:00Z", 4),
            [
                "2026-04-03T16:00:00Z",
                "2026-04-04T16:00:00Z",
                "2026-04-05T17:00:00Z",
                "2026-04-06T17:00:00Z"
            ]
        );
        assert_eq!(
            runs(&s, "2026-10-02T12:00:00Z", 4),
            [
                "2026-10-02T17:00:00Z",
                "2026-10-03T16:30:00Z",
                "2026-10-04T16:00:00Z",
                "2026-10-05T16:00:00Z"
            ]
        );
        let s = Schedule::parse("15 */6 * * *", "Asia/Kathmandu").unwrap();
        assert_eq!(
            runs(&s, "2026-06-01T00:00:00Z", 4),
            [
                "2026-06-01T00:30:00Z",
                "2026-06-01T06:30:00Z",
                "2026-06-01T12:30:00Z",
                "2026-06-01T18:30:00Z"
            ]
        );
        let s = Schedule::parse("0 12 * * *", "Pacific/Chatham").unwrap();
        assert_eq!(
            runs(&s, "2026-04-03T12:00:00Z", 4),
            [
                "2026-04-03T22:15:00Z",
                "2026-04-04T23:15:00Z",
                "2026-04-05T23:15:00Z",
                "2026-04-06T23:15:00Z"
            ]
        );
    }
}
