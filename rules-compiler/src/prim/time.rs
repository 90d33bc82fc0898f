//! Timestamps (nanoseconds since the epoch, years 1..=9999) and durations (nanoseconds).

use super::Val;

pub const NANOS: i128 = 1_000_000_000;
/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999999Z.
const MIN_NANOS: i128 = -62_135_596_800 * NANOS;
const MAX_NANOS: i128 = 253_402_300_800 * NANOS - 1;
/// Durations are limited to about 10,000 years either way (315,576,000,000 seconds).
const MAX_DURATION: i128 = 315_576_000_000 * NANOS + (NANOS - 1);

/// A timestamp, or error outside years 1..=9999.
pub fn timestamp(nanos: i128) -> Option<Val> {
    (MIN_NANOS..=MAX_NANOS)
        .contains(&nanos)
        .then_some(Val::Timestamp(nanos))
}

/// A duration, or error beyond the limit.
pub fn duration(nanos: i128) -> Option<Val> {
    (-MAX_DURATION..=MAX_DURATION)
        .contains(&nanos)
        .then_some(Val::Duration(nanos))
}

/// RFC 3339 with up to nine fraction digits, any offset.
pub fn parse_timestamp(text: &str) -> Option<i128> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    let n = i128::from(parsed.timestamp()) * NANOS + i128::from(parsed.timestamp_subsec_nanos());
    (MIN_NANOS..=MAX_NANOS).contains(&n).then_some(n)
}

/// UTC, `Z`, six fraction digits, or nine when the nanoseconds need them.
pub fn format_timestamp(nanos: i128) -> String {
    let secs = nanos.div_euclid(NANOS);
    let sub = nanos.rem_euclid(NANOS);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    if sub % 1_000 == 0 {
        format!(
            "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:06}Z",
            sub / 1_000
        )
    } else {
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{sub:09}Z")
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// A timestamp's method: `year`, `month`, ..., `date` (a timestamp), `time` (a duration).
pub fn timestamp_method(name: &str, nanos: i128) -> Option<Val> {
    let secs = i64::try_from(nanos.div_euclid(NANOS)).ok()?;
    let sub = i64::try_from(nanos.rem_euclid(NANOS)).ok()?;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    Some(Val::Int(match name {
        "year" => year,
        "month" => month,
        "day" => day,
        "hours" => rem / 3600,
        "minutes" => rem / 60 % 60,
        "seconds" => rem % 60,
        "nanos" => sub,
        "to_millis" => secs.checked_mul(1000)?.checked_add(sub / 1_000_000)?,
        // Monday is 1 (ISO).
        "day_of_week" => (days + 3).rem_euclid(7) + 1,
        "day_of_year" => days - days_from_civil(year, 1, 1) + 1,
        "date" => return timestamp(i128::from(days) * 86_400 * NANOS),
        "time" => return duration(i128::from(rem) * NANOS + i128::from(sub)),
        _ => return None,
    }))
}

/// `duration.value(n, unit)`.
pub fn duration_value(n: i64, unit: &str) -> Option<Val> {
    let scale: i128 = match unit {
        "w" => 7 * 86_400 * NANOS,
        "d" => 86_400 * NANOS,
        "h" => 3_600 * NANOS,
        "m" => 60 * NANOS,
        "s" => NANOS,
        "ms" => 1_000_000,
        "ns" => 1,
        _ => return None,
    };
    duration(i128::from(n).checked_mul(scale)?)
}
