//! The aggregates of an aggregation query (`count`, `sum`, `avg`), kept by an
//! [`Accumulator`] that documents can be added to and removed from in any order.
//!
//! One code path: [`super::aggregate`] (the extension's one-shot result and the naive
//! evaluator) adds the documents of the result window to an accumulator and reads its row;
//! the live-query sidecar keeps an accumulator per aggregation target, adds a document's
//! [`Contribution`] when it enters the results and removes it when it leaves. The row read
//! after any sequence of additions and removals equals, bit for bit, the row of a fresh
//! accumulator over the documents left, because nothing in it depends on order:
//!
//! - `count(*)` / `count_up_to(n)`: the number of documents (at most `n`).
//! - `sum(f)` and `avg(f)` take the numeric values of `f` (Firestore's: integers and doubles;
//!   every other value, `null` and a missing field are skipped).
//! - Integers are summed exactly (an `i128`, which no 2^64 int64 values can overflow).
//!   Finite doubles are summed exactly too, in a fixed-point accumulator wide enough for any
//!   sum of doubles (`exact_sum`). NaN, `+inf` and `-inf` are counted apart.
//! - `sum`: with no double among the values and an exact sum that fits int64, that integer
//!   (`0` when there are no values). Otherwise a double: NaN if a NaN was summed or both
//!   infinities were; else `±inf` if one infinity was; else the exact sum of every value,
//!   integers and doubles together, rounded once to the nearest double (ties to even; `±inf`
//!   past the largest double, `+0.0` for an exact zero). Firestore documents the same result
//!   types (int64 unless a double is summed or int64 overflows, NaN propagates, IEEE-754
//!   infinities) but a sequential double sum whose last bits depend on order; the exact sum
//!   is its correctly rounded value and never depends on the order of the results.
//! - `avg`: `null` when there are no values, else the double `sum` above divided by their
//!   count (so an average whose sum is beyond the largest double is `±inf`).

mod exact_sum;

use std::collections::HashMap;

use crate::path::{FieldPath, ResourcePath};
use crate::value::{Map, Value};

use super::ast::{AggregateFunction, Query};
use super::matcher::field_value;
use super::result::count_value;
use exact_sum::ExactSum;

/// A value `sum` and `avg` take (the others are skipped).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Integer(i64),
    Double(f64),
}

impl Number {
    /// The number `value` is, if it is one.
    pub fn of(value: &Value) -> Option<Number> {
        match value {
            Value::Integer(i) => Some(Number::Integer(*i)),
            Value::Double(d) => Some(Number::Double(*d)),
            _ => None,
        }
    }
}

/// The exact running sum of numbers (see the module documentation), with their count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumericSum {
    /// Exact sum of the integers.
    integers: i128,
    /// Exact sum of the finite doubles.
    finite: ExactSum,
    /// How many values were summed, of which doubles (finite or not), NaN, +inf, -inf.
    count: u64,
    doubles: u64,
    nan: u64,
    positive_infinities: u64,
    negative_infinities: u64,
}

impl NumericSum {
    /// Add a number.
    pub fn add(&mut self, n: Number) {
        self.update(n, false);
    }

    /// Remove a number added before (removing one that was not added leaves a state no
    /// set of numbers has; adding it back restores the previous one).
    pub fn remove(&mut self, n: Number) {
        self.update(n, true);
    }

    fn update(&mut self, n: Number, remove: bool) {
        let step = |c: &mut u64| {
            *c = if remove {
                c.wrapping_sub(1)
            } else {
                c.wrapping_add(1)
            };
        };
        step(&mut self.count);
        match n {
            Number::Integer(i) => {
                let i = i128::from(i);
                self.integers = if remove {
                    self.integers.wrapping_sub(i)
                } else {
                    self.integers.wrapping_add(i)
                };
            }
            Number::Double(d) => {
                step(&mut self.doubles);
                if d.is_nan() {
                    step(&mut self.nan);
                } else if d == f64::INFINITY {
                    step(&mut self.positive_infinities);
                } else if d == f64::NEG_INFINITY {
                    step(&mut self.negative_infinities);
                } else {
                    self.finite.add_double(d, remove);
                }
            }
        }
    }

    /// How many numbers were summed.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum as a double: NaN, an infinity, or the exact sum rounded once.
    pub fn total(&self) -> f64 {
        if self.nan > 0 || (self.positive_infinities > 0 && self.negative_infinities > 0) {
            f64::NAN
        } else if self.positive_infinities > 0 {
            f64::INFINITY
        } else if self.negative_infinities > 0 {
            f64::NEG_INFINITY
        } else if self.finite.is_zero() {
            #[allow(clippy::cast_precision_loss)]
            let integers = self.integers as f64;
            integers
        } else {
            let mut exact = self.finite.clone();
            exact.add_integer(self.integers, false);
            exact.to_f64()
        }
    }

    /// `sum`'s value: an integer while no double was summed and the sum fits int64, else
    /// [`NumericSum::total`].
    pub fn sum(&self) -> Value {
        match i64::try_from(self.integers) {
            Ok(i) if self.doubles == 0 => Value::Integer(i),
            _ => Value::Double(self.total()),
        }
    }

    /// `avg`'s value: `null` without numbers, else [`NumericSum::total`] over their count.
    pub fn average(&self) -> Value {
        if self.count == 0 {
            Value::Null
        } else {
            #[allow(clippy::cast_precision_loss)]
            let n = self.count as f64;
            Value::Double(self.total() / n)
        }
    }
}

/// What one document contributes to the sums of an [`Accumulator`]: its number at each
/// summed field (`None`: not a number). Counts need nothing, so a count-only query's
/// contributions are empty (and allocate nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contribution {
    numbers: Box<[Option<Number>]>,
}

/// How an aggregation reads the accumulator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reading {
    Count { up_to: Option<u64> },
    Sum(usize),
    Avg(usize),
}

/// The running aggregates of an aggregation query (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accumulator {
    /// Each aggregation's alias and what it reads, in the query's order.
    readings: Vec<(String, Reading)>,
    /// The summed fields (`sum(f)` and `avg(f)` of one field share one).
    fields: Vec<FieldPath>,
    sums: Vec<NumericSum>,
    documents: u64,
}

impl Accumulator {
    /// An empty accumulator for `query`'s aggregations (none for other queries: its row is
    /// then empty).
    pub fn new(query: &Query) -> Accumulator {
        let mut fields: Vec<FieldPath> = Vec::new();
        let mut slot = |field: &FieldPath| match fields.iter().position(|f| f == field) {
            Some(i) => i,
            None => {
                fields.push(field.clone());
                fields.len() - 1
            }
        };
        let readings = query
            .aggregations()
            .unwrap_or_default()
            .iter()
            .map(|a| {
                let reading = match &a.function {
                    AggregateFunction::Count { up_to } => Reading::Count { up_to: *up_to },
                    AggregateFunction::Sum(field) => Reading::Sum(slot(field)),
                    AggregateFunction::Avg(field) => Reading::Avg(slot(field)),
                };
                (a.alias.clone(), reading)
            })
            .collect();
        let sums = vec![NumericSum::default(); fields.len()];
        Accumulator {
            readings,
            fields,
            sums,
            documents: 0,
        }
    }

    /// What the document `doc` at `path` contributes.
    pub fn contribution(&self, path: &ResourcePath, doc: &Map) -> Contribution {
        Contribution {
            numbers: self
                .fields
                .iter()
                .map(|field| field_value(path, doc, field).and_then(|v| Number::of(&v)))
                .collect(),
        }
    }

    /// Add a document by its contribution.
    pub fn add(&mut self, contribution: &Contribution) {
        self.documents = self.documents.wrapping_add(1);
        for (sum, n) in self.sums.iter_mut().zip(contribution.numbers.iter()) {
            if let Some(n) = n {
                sum.add(*n);
            }
        }
    }

    /// Remove a document by the contribution it was added with.
    pub fn remove(&mut self, contribution: &Contribution) {
        self.documents = self.documents.wrapping_sub(1);
        for (sum, n) in self.sums.iter_mut().zip(contribution.numbers.iter()) {
            if let Some(n) = n {
                sum.remove(*n);
            }
        }
    }

    /// Add the document `doc` at `path` (as `add(&contribution(path, doc))`, without
    /// keeping the contribution).
    pub fn add_document(&mut self, path: &ResourcePath, doc: &Map) {
        self.documents = self.documents.wrapping_add(1);
        for (sum, field) in self.sums.iter_mut().zip(&self.fields) {
            if let Some(n) = field_value(path, doc, field).and_then(|v| Number::of(&v)) {
                sum.add(n);
            }
        }
    }

    /// Start over with no documents.
    pub fn clear(&mut self) {
        self.documents = 0;
        self.sums.fill(NumericSum::default());
    }

    /// How many documents are in.
    pub fn documents(&self) -> u64 {
        self.documents
    }

    /// The aggregation row: each aggregation's alias and value.
    pub fn row(&self) -> Map {
        self.readings
            .iter()
            .map(|(alias, reading)| {
                let value = match reading {
                    Reading::Count { up_to } => count_value(*up_to, self.documents),
                    Reading::Sum(i) => self.sums.get(*i).map_or(Value::Integer(0), |s| s.sum()),
                    Reading::Avg(i) => self.sums.get(*i).map_or(Value::Null, |s| s.average()),
                };
                (alias.clone(), value)
            })
            .collect()
    }
}

/// An accumulator with the contribution of each document it holds, by name: what a live
/// aggregation target keeps instead of the documents.
#[derive(Debug, Clone)]
pub struct RunningAggregates {
    accumulator: Accumulator,
    contributions: HashMap<ResourcePath, Contribution>,
}

impl RunningAggregates {
    /// Empty, for `query`'s aggregations.
    pub fn new(query: &Query) -> RunningAggregates {
        RunningAggregates {
            accumulator: Accumulator::new(query),
            contributions: HashMap::new(),
        }
    }

    /// Put in (or replace) the document `doc` at `path`; `true` if it was not in.
    pub fn insert(&mut self, path: &ResourcePath, doc: &Map) -> bool {
        let contribution = self.accumulator.contribution(path, doc);
        self.accumulator.add(&contribution);
        match self.contributions.insert(path.clone(), contribution) {
            Some(old) => {
                self.accumulator.remove(&old);
                false
            }
            None => true,
        }
    }

    /// Take out the document at `path`; `true` if it was in.
    pub fn remove(&mut self, path: &ResourcePath) -> bool {
        match self.contributions.remove(path) {
            Some(old) => {
                self.accumulator.remove(&old);
                true
            }
            None => false,
        }
    }

    /// Whether the document at `path` is in.
    pub fn contains(&self, path: &ResourcePath) -> bool {
        self.contributions.contains_key(path)
    }

    /// Take out every document, returning their names.
    pub fn drain(&mut self) -> impl Iterator<Item = ResourcePath> + '_ {
        self.accumulator.clear();
        self.contributions.drain().map(|(path, _)| path)
    }

    /// How many documents are in.
    pub fn len(&self) -> usize {
        self.contributions.len()
    }

    /// Whether no document is in.
    pub fn is_empty(&self) -> bool {
        self.contributions.is_empty()
    }

    /// The aggregation row over the documents in.
    pub fn row(&self) -> Map {
        self.accumulator.row()
    }
}
