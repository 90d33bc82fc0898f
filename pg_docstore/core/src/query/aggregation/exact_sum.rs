//! An exact, order-independent sum of finite doubles and integers: a fixed-point integer wide
//! enough to hold any sum of up to 2^64 doubles exactly (a "Kulisch" accumulator).
//!
//! Every finite double is an integer multiple of 2^-1074 (the smallest subnormal) below
//! 2^1024, so `value * 2^1074` is an integer of at most 2098 bits. The accumulator keeps the
//! sum of those integers in two's complement over 34 64-bit limbs (2176 bits): 2098 bits, 64
//! more for up to 2^64 terms, one for the sign, and room to spare. Adding or removing a term
//! is exact (it touches three limbs and propagates a carry), so the state after any sequence
//! of additions and removals depends only on the multiset of terms left, and the double read
//! from it is the exact sum rounded once (to nearest, ties to even). That is what lets the
//! live-query sidecar keep a running sum that equals a fresh [`super::super::aggregate`]
//! bit for bit.

/// Limbs of the fixed-point integer (little-endian, two's complement).
const LIMBS: usize = 34;
/// The fixed point: the accumulator holds `sum * 2^FRACTION_BITS`.
const FRACTION_BITS: u32 = 1074;
/// Bits of a double's significand field.
const SIGNIFICAND_BITS: u32 = 52;
/// The bit pattern of positive infinity (every finite magnitude is below it).
const INFINITY_BITS: u64 = 0x7FF0_0000_0000_0000;

/// The exact sum of finite doubles and integers (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExactSum {
    limbs: [u64; LIMBS],
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum { limbs: [0; LIMBS] }
    }
}

impl ExactSum {
    /// Add (`negate`: subtract) the finite double `x`. Infinities and NaN are the caller's
    /// (they are counted apart); passed here they would be taken as their bit pattern's
    /// finite neighbour, so callers never do.
    pub(crate) fn add_double(&mut self, x: f64, negate: bool) {
        let bits = x.to_bits();
        let exponent = (bits >> SIGNIFICAND_BITS) & 0x7FF;
        let fraction = bits & ((1 << SIGNIFICAND_BITS) - 1);
        // value = significand * 2^(shift - 1074)
        let (significand, shift) = if exponent == 0 {
            (fraction, 0)
        } else {
            (fraction | (1 << SIGNIFICAND_BITS), exponent - 1)
        };
        if significand == 0 {
            return;
        }
        let negative = (bits >> 63 == 1) != negate;
        self.add_magnitude(
            u128::from(significand),
            u32::try_from(shift).unwrap_or(0),
            negative,
        );
    }

    /// Add (`negate`: subtract) the integer `i`.
    pub(crate) fn add_integer(&mut self, i: i128, negate: bool) {
        if i != 0 {
            self.add_magnitude(i.unsigned_abs(), FRACTION_BITS, (i < 0) != negate);
        }
    }

    /// Add `magnitude * 2^shift` (subtract when `negative`) to the fixed-point integer.
    /// `shift` is at most 2045 (a double's) or 1074 (an integer's), so the three words below
    /// land inside the limbs.
    fn add_magnitude(&mut self, magnitude: u128, shift: u32, negative: bool) {
        let index = usize::try_from(shift / 64).unwrap_or(LIMBS);
        let offset = shift % 64;
        let low = magnitude << offset;
        let words = [
            low as u64,
            (low >> 64) as u64,
            if offset == 0 {
                0
            } else {
                (magnitude >> (128 - offset)) as u64
            },
        ];
        let mut carry = false;
        for (i, limb) in self.limbs.iter_mut().enumerate().skip(index) {
            let word = words.get(i - index).copied().unwrap_or(0);
            if i >= index + words.len() && !carry {
                break;
            }
            if negative {
                let (d, b1) = limb.overflowing_sub(word);
                let (d, b2) = d.overflowing_sub(u64::from(carry));
                *limb = d;
                carry = b1 || b2;
            } else {
                let (s, c1) = limb.overflowing_add(word);
                let (s, c2) = s.overflowing_add(u64::from(carry));
                *limb = s;
                carry = c1 || c2;
            }
        }
    }

    /// Whether the sum is exactly zero.
    pub(crate) fn is_zero(&self) -> bool {
        self.limbs.iter().all(|&l| l == 0)
    }

    /// The sum rounded once to the nearest double (ties to even); `±inf` when it is beyond
    /// the largest double. An exact zero is `+0.0`.
    pub(crate) fn to_f64(&self) -> f64 {
        let negative = self.limbs[LIMBS - 1] >> 63 == 1;
        let mut magnitude = self.limbs;
        if negative {
            // Two's complement negation: invert, add one.
            let mut carry = true;
            for limb in &mut magnitude {
                let (s, c) = (!*limb).overflowing_add(u64::from(carry));
                *limb = s;
                carry = c;
            }
        }
        let Some(top) = magnitude.iter().rposition(|&l| l != 0) else {
            return 0.0;
        };
        let high_bit = top * 64 + 63 - magnitude[top].leading_zeros() as usize;
        let bits = if high_bit <= SIGNIFICAND_BITS as usize {
            // Below 2^53 units of 2^-1074 the value is a subnormal or in the smallest normal
            // binade, whose encoding is the integer itself.
            magnitude[0]
        } else {
            let shift = high_bit - SIGNIFICAND_BITS as usize;
            let significand = bits_at(&magnitude, shift, SIGNIFICAND_BITS + 1);
            let guard = bits_at(&magnitude, shift - 1, 1) == 1;
            let sticky = any_below(&magnitude, shift - 1);
            let round_up = guard && (sticky || significand & 1 == 1);
            // Biased exponent shift + 1 and the hidden bit: (shift << 52) + significand (a
            // rounding carry into bit 53 moves to the next binade by the same addition).
            let shift = u64::try_from(shift).unwrap_or(u64::MAX >> 1).min(2047);
            let encoded = (shift << SIGNIFICAND_BITS) + significand + u64::from(round_up);
            encoded.min(INFINITY_BITS)
        };
        f64::from_bits(bits | (u64::from(negative) << 63))
    }
}

/// `len` (at most 64) bits of `limbs` starting at bit `start`.
fn bits_at(limbs: &[u64; LIMBS], start: usize, len: u32) -> u64 {
    let (index, offset) = (start / 64, start % 64);
    let low = limbs.get(index).copied().unwrap_or(0) >> offset;
    let high = if offset == 0 {
        0
    } else {
        limbs.get(index + 1).copied().unwrap_or(0) << (64 - offset)
    };
    let word = low | high;
    if len >= 64 {
        word
    } else {
        word & ((1 << len) - 1)
    }
}

/// Whether any bit of `limbs` below bit `end` is set.
fn any_below(limbs: &[u64; LIMBS], end: usize) -> bool {
    let (index, offset) = (end / 64, end % 64);
    limbs[..index.min(LIMBS)].iter().any(|&l| l != 0)
        || (offset > 0
            && limbs
                .get(index)
                .is_some_and(|&l| l & ((1 << offset) - 1) != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(values: &[f64]) -> f64 {
        let mut s = ExactSum::default();
        for &v in values {
            s.add_double(v, false);
        }
        s.to_f64()
    }

    #[test]
    fn single_values_round_trip() {
        for v in [
            0.0,
            1.0,
            -1.0,
            0.1,
            -2.5e-310,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE / 2.0,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            1e300,
            123_456.789,
            9_007_199_254_740_993.0,
        ] {
            assert_eq!(sum(&[v]).to_bits(), (v + 0.0).to_bits(), "{v:e}");
        }
    }

    #[test]
    fn sums_are_exact_then_rounded_once() {
        // Sequentially 0.1 + 0.2 + 0.3 is 0.6000000000000001; the exact sum rounds to 0.6.
        assert_eq!(sum(&[0.1, 0.2, 0.3]), 0.6);
        assert_eq!(sum(&[0.3, 0.2, 0.1]), 0.6);
        // Cancellation keeps the small term.
        assert_eq!(sum(&[1e100, 1.0, -1e100]), 1.0);
        // An intermediate overflow does not stick.
        assert_eq!(sum(&[f64::MAX, f64::MAX, -f64::MAX]), f64::MAX);
        assert_eq!(sum(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(sum(&[f64::MIN, f64::MIN]), f64::NEG_INFINITY);
        // Ties go to even: 2^53 + 1 is halfway between 2^53 and 2^53 + 2.
        assert_eq!(
            sum(&[9_007_199_254_740_992.0, 1.0]),
            9_007_199_254_740_992.0
        );
        assert_eq!(
            sum(&[9_007_199_254_740_994.0, 1.0]),
            9_007_199_254_740_996.0
        );
        // Subnormals add exactly.
        assert_eq!(sum(&[5e-324, 5e-324]), 1e-323);
        assert_eq!(sum(&[1.0, -1.0]).to_bits(), 0.0f64.to_bits());
    }

    #[test]
    fn removal_undoes_addition() {
        let mut s = ExactSum::default();
        for v in [1e308, -3.5, 5e-324, 0.1, -1e-300] {
            s.add_double(v, false);
        }
        s.add_integer(i128::from(i64::MIN), false);
        s.add_integer(i128::from(i64::MIN), true);
        for v in [-1e-300, 0.1, 1e308, -3.5, 5e-324] {
            s.add_double(v, true);
        }
        assert!(s.is_zero());
    }

    #[test]
    fn integers_round_like_a_cast() {
        for i in [
            i128::from(i64::MAX) + 1,
            i128::from(i64::MAX) * 3,
            i128::from(i64::MIN) * 5 - 7,
            (1 << 100) + 1,
            -(1 << 54) - 1,
        ] {
            let mut s = ExactSum::default();
            s.add_integer(i, false);
            #[allow(clippy::cast_precision_loss)]
            let cast = i as f64;
            assert_eq!(s.to_f64().to_bits(), cast.to_bits(), "{i}");
        }
    }
}
