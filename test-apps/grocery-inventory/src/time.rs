//! RFC 3339 timestamps without a date-time dependency.
//!
//! The app only ever needs "now" and fixed seed times, in UTC with whole seconds, so a small
//! conversion from Unix seconds to a civil date is all it takes.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time as Unix seconds (0 if the clock is before 1970).
pub(crate) fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The current time as an RFC 3339 UTC timestamp.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(now_unix())
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn rfc3339(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let secs_of_day = unix_seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs_of_day / 3600,
        (secs_of_day % 3600) / 60,
        secs_of_day % 60
    )
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day).
///
/// Works in 400-year eras, which repeat exactly, with years that start on March 1 so the
/// leap day falls at the end of a year.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_154_400), "2026-11-20T06:00:00Z");
        assert_eq!(rfc3339(1_795_154_400 + 86_399), "2026-11-21T05:59:59Z");
    }
}
