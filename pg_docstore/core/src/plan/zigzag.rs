//! The zig-zag merge join of several scans (the Firestore paper's join of index ranges), one
//! step at a time, over any source of rows: the executor reads through SPI, the simulator
//! (`plan::simulate`) from an in-memory key set, and both run exactly this code.
//!
//! Every scan of a join yields its rows in the plan's order. The lead (scan 0) proposes a
//! candidate; each other scan seeks to it: a row at the candidate agrees, a row past it becomes
//! the new candidate that every scan must reach again. Reads are proportional to the rows the
//! scans disagree on, never to the collection.

use std::cmp::Ordering;

use super::{seek_key, OrderKey, Plan, Scan};

/// A row of a scan: its position in the plan's order, and whether the matcher must confirm it
/// (an indexed value was cut at 1,500 bytes).
#[derive(Debug, Clone)]
pub struct JoinRow {
    pub key: OrderKey,
    pub recheck: bool,
}

/// Why a join step failed: its source's error, or a seek that went backwards (a bug: keys
/// and order disagree).
#[derive(Debug)]
pub enum StepError<E> {
    Source(E),
    Backwards,
}

/// The next row all `scans` agree on, and the seek key that resumes the lead past it; `None`
/// when a scan runs out. `first_at(s, seek)` is the first row of scan `s` at or after `seek`
/// (a [`seek_key`] result; `None`: where the scan stands). `resume` is what the previous step
/// returned (`None` for the first step).
///
/// # Errors
/// What `first_at` reports, or [`StepError::Backwards`].
pub fn next_agreed<E>(
    plan: &Plan,
    scans: &[Scan],
    resume: Option<&[u8]>,
    mut first_at: impl FnMut(usize, Option<&[u8]>) -> Result<Option<JoinRow>, E>,
) -> Result<Option<(JoinRow, Vec<u8>)>, StepError<E>> {
    let Some(lead) = scans.first() else {
        return Ok(None);
    };
    let Some(mut candidate) = first_at(0, resume).map_err(StepError::Source)? else {
        return Ok(None);
    };
    let mut agreed = 1;
    let mut i = 1;
    while agreed < scans.len() {
        let s = i % scans.len();
        let target = seek_key(&scans[s], &candidate.key, false);
        let Some(found) = first_at(s, Some(&target)).map_err(StepError::Source)? else {
            return Ok(None);
        };
        match plan.compare(&found.key, &candidate.key) {
            Ordering::Equal => {
                candidate.recheck |= found.recheck;
                agreed += 1;
            }
            Ordering::Greater => {
                candidate = found;
                agreed = 1;
            }
            Ordering::Less => return Err(StepError::Backwards),
        }
        i += 1;
    }
    let after = seek_key(lead, &candidate.key, true);
    Ok(Some((candidate, after)))
}
