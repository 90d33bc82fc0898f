//! The visibility rule of the snapshot hand-off (docs/architecture.md).
//!
//! A new target reads `pg_current_snapshot()` in the transaction of its initial query. A
//! decoded transaction applies to the target iff its xid is not visible in that snapshot:
//! `visible(S, x) = x < S.xmin || (x < S.xmax && x not in S.xip)`. Snapshots carry 64-bit
//! xids (`xid8`: epoch and xid); pgoutput sends 32-bit xids, widened here against the
//! snapshot's xmax. Never by LSN, never by xmin alone.

use thiserror::Error;

/// A snapshot as `pg_current_snapshot()` reports it (64-bit xids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Every xid below it had finished when the snapshot was taken.
    pub xmin: u64,
    /// Every xid at or above it had not started.
    pub xmax: u64,
    /// The xids in `[xmin, xmax)` still in progress, sorted.
    pub xip: Vec<u64>,
}

/// Why snapshot text was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid pg_snapshot text {0:?}")]
pub struct SnapshotError(pub String);

impl Snapshot {
    /// A snapshot from its parts (`xip` in any order).
    pub fn new(xmin: u64, xmax: u64, mut xip: Vec<u64>) -> Snapshot {
        xip.sort_unstable();
        xip.dedup();
        Snapshot { xmin, xmax, xip }
    }

    /// Parse the text form of `pg_snapshot` (`xmin:xmax:xip,...`, e.g. `10:20:10,14,15`).
    ///
    /// # Errors
    /// [`SnapshotError`] for text that is not three `:`-separated parts of decimal xids with
    /// `xmin <= xmax` and every xip in `[xmin, xmax)`.
    pub fn parse(text: &str) -> Result<Snapshot, SnapshotError> {
        let error = || SnapshotError(text.chars().take(100).collect());
        let mut parts = text.split(':');
        let (Some(xmin), Some(xmax), Some(xip), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(error());
        };
        let xmin: u64 = xmin.parse().map_err(|_| error())?;
        let xmax: u64 = xmax.parse().map_err(|_| error())?;
        let xip = if xip.is_empty() {
            Vec::new()
        } else {
            xip.split(',')
                .map(|x| x.parse::<u64>().map_err(|_| error()))
                .collect::<Result<Vec<_>, _>>()?
        };
        if xmin > xmax || xip.iter().any(|x| *x < xmin || *x >= xmax) {
            return Err(error());
        }
        Ok(Snapshot::new(xmin, xmax, xip))
    }

    /// Whether the transaction `xid` (64-bit) is visible in this snapshot.
    pub fn visible(&self, xid: u64) -> bool {
        xid < self.xmin || (xid < self.xmax && self.xip.binary_search(&xid).is_err())
    }

    /// A 32-bit xid of pgoutput as the 64-bit xid it is, relative to this snapshot's xmax.
    pub fn widen(&self, xid: u32) -> u64 {
        widen(xid, self.xmax)
    }

    /// Whether a decoded transaction with 32-bit `xid` applies to a target whose initial
    /// results were read in this snapshot: iff the snapshot does not see it.
    pub fn applies_to(&self, xid: u32) -> bool {
        !self.visible(self.widen(xid))
    }
}

/// The 64-bit xid whose low 32 bits are `xid`, nearest to `reference` (exact for every xid
/// within 2^31 of it; Postgres keeps every live xid that close to the next xid). Near
/// epoch 0 an xid that would widen below zero is taken in epoch 0.
pub fn widen(xid: u32, reference: u64) -> u64 {
    // Truncation to the low 32 bits is the point.
    #[allow(clippy::cast_possible_truncation)]
    let low = reference as u32;
    let delta = i64::from(xid.wrapping_sub(low) as i32);
    reference
        .checked_add_signed(delta)
        .unwrap_or(u64::from(xid))
}

/// The 32-bit xid pgoutput sends for a 64-bit xid.
pub fn narrow(xid: u64) -> u32 {
    (xid & 0xFFFF_FFFF) as u32
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parse_snapshot_text() {
        assert_eq!(
            Snapshot::parse("10:20:15,12"),
            Ok(Snapshot {
                xmin: 10,
                xmax: 20,
                xip: vec![12, 15]
            })
        );
        assert_eq!(Snapshot::parse("7:7:").map(|s| s.xip), Ok(vec![]));
        for bad in [
            "", "1:2", "1:2:3:4", "3:2:", "1:5:0", "1:5:5", "a:5:", "1:5:2,,3",
        ] {
            assert!(Snapshot::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn visibility_by_the_rule() {
        let s = Snapshot::new(10, 20, vec![12, 15]);
        for (x, seen) in [
            (9, true),
            (10, true),
            (12, false),
            (13, true),
            (15, false),
            (19, true),
            (20, false),
            (25, false),
        ] {
            assert_eq!(s.visible(x), seen, "xid {x}");
            assert_eq!(s.applies_to(narrow(x)), !seen, "xid {x}");
        }
    }

    #[test]
    fn widening_across_an_epoch_boundary() {
        let epoch = 1u64 << 32;
        // xmax just past the wrap: an xid just before it belongs to the previous epoch.
        assert_eq!(widen(u32::MAX - 5, epoch + 3), epoch - 6);
        assert_eq!(widen(2, epoch + 3), epoch + 2);
        // xmax just before the wrap: a small xid is in the next epoch.
        assert_eq!(widen(3, epoch - 2), epoch + 3);
        // Epoch 0: nothing widens below zero.
        assert_eq!(widen(u32::MAX, 5), u64::from(u32::MAX));
        let s = Snapshot::new(epoch - 10, epoch + 5, vec![epoch - 3]);
        assert!(s.applies_to(narrow(epoch - 3)));
        assert!(!s.applies_to(narrow(epoch - 11)));
        assert!(!s.applies_to(narrow(epoch + 1)));
        assert!(s.applies_to(narrow(epoch + 5)));
    }

    proptest! {
        #[test]
        fn widen_inverts_narrow_within_2_31(reference in (1u64 << 31)..(u64::MAX >> 1), offset in -(1i64 << 31) + 1..(1i64 << 31)) {
            let x = reference.checked_add_signed(offset).unwrap();
            prop_assert_eq!(widen(narrow(x), reference), x);
        }

        #[test]
        fn widen_keeps_the_low_bits_and_stays_near(xid in any::<u32>(), reference in any::<u64>()) {
            let w = widen(xid, reference);
            prop_assert_eq!(narrow(w), xid);
            if (1 << 32..=u64::MAX - (1 << 32)).contains(&reference) {
                prop_assert!(w.abs_diff(reference) <= 1 << 31);
            }
        }

        #[test]
        fn applies_to_is_not_visible_of_the_widened_xid(
            epoch in 0u64..1_000,
            base in any::<u32>(),
            width in 0u64..1_000,
            running in proptest::collection::vec(0u64..1_000, 0..10),
            probe in -2_000i64..2_000,
        ) {
            let xmin = (epoch << 32) + u64::from(base) + (1 << 31);
            let xmax = xmin + width;
            let xip: Vec<u64> = running.into_iter().filter(|r| *r < width).map(|r| xmin + r).collect();
            let s = Snapshot::new(xmin, xmax, xip.clone());
            let x = xmin.checked_add_signed(probe).unwrap();
            // The rule, spelled out.
            let seen = x < xmin || (x < xmax && !xip.contains(&x));
            prop_assert_eq!(s.visible(x), seen);
            prop_assert_eq!(s.applies_to(narrow(x)), !seen);
        }

        #[test]
        fn parse_round_trips(xmin in 0u64..u64::MAX / 2, width in 0u64..100, running in proptest::collection::vec(0u64..100, 0..5)) {
            let xmax = xmin + width;
            let s = Snapshot::new(xmin, xmax, running.into_iter().filter(|r| *r < width).map(|r| xmin + r).collect());
            let xip: Vec<String> = s.xip.iter().map(u64::to_string).collect();
            let text = format!("{}:{}:{}", s.xmin, s.xmax, xip.join(","));
            prop_assert_eq!(Snapshot::parse(&text), Ok(s));
        }
    }
}
