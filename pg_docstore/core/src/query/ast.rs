//! The query AST: one model for the text dialect, the structured JSON form, the planner and the
//! live-query matcher.
//!
//! A [`Query`] is what the user asked for (explicit orders only). Build one with a front end
//! ([`crate::query::parse_query`], [`crate::query::parse_structured`]) or by hand followed by
//! [`Query::validate`], which canonicalises it and checks Firestore's rules. The full order a
//! query runs in (implicit inequality orders and `__name__`) is [`Query::normalized_order`].

use crate::path::{FieldPath, PathError, ResourcePath};
use crate::value::Value;

pub use crate::limits::{MAX_AGGREGATIONS, MAX_DISJUNCTIONS, MAX_LIMIT, MAX_NOT_IN_VALUES};

/// Which documents a query reads: one collection, or a collection group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The document the collection (or the group search) hangs from; `None` is the root.
    pub parent: Option<ResourcePath>,
    /// The collection ID: the last segment of the collection path, or the group's name.
    pub collection_id: String,
    /// `false`: exactly the collection `parent/collection_id`. `true`: every collection named
    /// `collection_id` anywhere under `parent` (a collection group query).
    pub all_descendants: bool,
}

impl Source {
    /// The path `parent/collection_id`, group query or not: what the rules' `list` check
    /// names as `request.path` (for a group query, a collection of that name directly under
    /// `parent`). [`Source::collection_path`] is the collection a plain query reads.
    ///
    /// # Errors
    /// [`PathError`] when the segments do not make a collection path (a parent that is a
    /// collection, an invalid collection ID).
    pub fn path_under_parent(&self) -> Result<ResourcePath, PathError> {
        let mut segments = self
            .parent
            .as_ref()
            .map_or_else(Vec::new, |p| p.segments().to_vec());
        segments.push(self.collection_id.clone());
        ResourcePath::from_segments(segments)
    }

    /// The source of a plain collection query.
    pub fn collection(path: &ResourcePath) -> Option<Source> {
        if path.is_document() {
            return None;
        }
        Some(Source {
            parent: path.parent(),
            collection_id: path.last().to_owned(),
            all_descendants: false,
        })
    }

    /// The source of a collection group query under `parent` (`None`: the whole database).
    pub fn group(parent: Option<ResourcePath>, collection_id: &str) -> Source {
        Source {
            parent,
            collection_id: collection_id.to_owned(),
            all_descendants: true,
        }
    }

    /// The source of a kindless query under `parent` (`None`: the whole database): every
    /// document below it, in any collection (Firestore's empty `collection_id` with
    /// `all_descendants`, python-firestore's `recursive()`).
    pub fn kindless(parent: Option<ResourcePath>) -> Source {
        Source {
            parent,
            collection_id: String::new(),
            all_descendants: true,
        }
    }

    /// Whether this is a kindless source ([`Source::kindless`]): an empty collection ID with
    /// `all_descendants`.
    pub fn is_kindless(&self) -> bool {
        self.all_descendants && self.collection_id.is_empty()
    }

    /// The collection path of a plain collection query (`None` for a group query, or when
    /// the ID is not a valid segment).
    pub fn collection_path(&self) -> Option<ResourcePath> {
        if self.all_descendants {
            return None;
        }
        match &self.parent {
            Some(parent) => parent.child(&self.collection_id).ok(),
            None => ResourcePath::from_segments(vec![self.collection_id.clone()]).ok(),
        }
    }

    /// Whether the document `path` is in this collection (or group).
    pub fn contains(&self, path: &ResourcePath) -> bool {
        let segments = path.segments();
        if !path.is_document() || segments.len() < 2 {
            return false;
        }
        let collection = &segments[segments.len() - 2];
        if *collection != self.collection_id && !self.is_kindless() {
            return false;
        }
        let parent = self.parent.as_ref().map_or(&[][..], |p| p.segments());
        let containing = &segments[..segments.len() - 2];
        if self.all_descendants {
            containing.starts_with(parent)
        } else {
            containing == parent
        }
    }
}

/// What a query returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// Whole documents (`select *`).
    Documents,
    /// Documents with only these fields (`select a, b.c`); names are always returned, so an
    /// empty list (`select __name__`) returns names only.
    Fields(Vec<FieldPath>),
    /// One row of aggregates over the query's results (`select count(*), avg(rating)`).
    Aggregations(Vec<Aggregation>),
}

/// One aggregate of an aggregation query, with the name it is returned under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregation {
    pub alias: String,
    pub function: AggregateFunction,
}

/// An aggregate function (Firestore's: count with optional `up_to`, sum, avg).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AggregateFunction {
    /// Number of results, stopping at `up_to` when given (`count(*)`, `count_up_to(n)`).
    Count { up_to: Option<u64> },
    /// Sum of the numeric values of the field (other values are ignored).
    Sum(FieldPath),
    /// Mean of the numeric values of the field (`null` when there are none).
    Avg(FieldPath),
}

/// A field filter operator (Firestore's `FieldFilter.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    ArrayContains,
    In,
    NotIn,
    ArrayContainsAny,
}

impl FieldOp {
    /// Every operator, for tests and tables.
    pub const ALL: [FieldOp; 10] = [
        FieldOp::Lt,
        FieldOp::Le,
        FieldOp::Gt,
        FieldOp::Ge,
        FieldOp::Eq,
        FieldOp::Ne,
        FieldOp::ArrayContains,
        FieldOp::In,
        FieldOp::NotIn,
        FieldOp::ArrayContainsAny,
    ];

    /// `<`, `<=`, `>`, `>=`.
    pub fn is_range(self) -> bool {
        matches!(self, FieldOp::Lt | FieldOp::Le | FieldOp::Gt | FieldOp::Ge)
    }

    /// Firestore's inequalities (they order the query by their field): ranges, `!=`, `not in`.
    pub fn is_inequality(self) -> bool {
        self.is_range() || matches!(self, FieldOp::Ne | FieldOp::NotIn)
    }

    /// Operators whose operand is a list of values.
    pub fn takes_list(self) -> bool {
        matches!(
            self,
            FieldOp::In | FieldOp::NotIn | FieldOp::ArrayContainsAny
        )
    }

    /// The operator in the text dialect.
    pub fn text(self) -> &'static str {
        match self {
            FieldOp::Lt => "<",
            FieldOp::Le => "<=",
            FieldOp::Gt => ">",
            FieldOp::Ge => ">=",
            FieldOp::Eq => "=",
            FieldOp::Ne => "!=",
            FieldOp::ArrayContains => "array_contains",
            FieldOp::In => "in",
            FieldOp::NotIn => "not in",
            FieldOp::ArrayContainsAny => "array_contains_any",
        }
    }

    /// The operator's name in the structured JSON form (Firestore's enum name).
    pub fn structured_name(self) -> &'static str {
        match self {
            FieldOp::Lt => "LESS_THAN",
            FieldOp::Le => "LESS_THAN_OR_EQUAL",
            FieldOp::Gt => "GREATER_THAN",
            FieldOp::Ge => "GREATER_THAN_OR_EQUAL",
            FieldOp::Eq => "EQUAL",
            FieldOp::Ne => "NOT_EQUAL",
            FieldOp::ArrayContains => "ARRAY_CONTAINS",
            FieldOp::In => "IN",
            FieldOp::NotIn => "NOT_IN",
            FieldOp::ArrayContainsAny => "ARRAY_CONTAINS_ANY",
        }
    }
}

/// A unary filter operator (Firestore's `UnaryFilter.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    IsNull,
    IsNan,
    IsNotNull,
    IsNotNan,
}

impl UnaryOp {
    /// Every operator, for tests and tables.
    pub const ALL: [UnaryOp; 4] = [
        UnaryOp::IsNull,
        UnaryOp::IsNan,
        UnaryOp::IsNotNull,
        UnaryOp::IsNotNan,
    ];

    /// `is not null` and `is not nan` are `!= null` and `!= NaN`: inequalities.
    pub fn is_inequality(self) -> bool {
        matches!(self, UnaryOp::IsNotNull | UnaryOp::IsNotNan)
    }

    /// The operator in the text dialect (after the field).
    pub fn text(self) -> &'static str {
        match self {
            UnaryOp::IsNull => "is null",
            UnaryOp::IsNan => "is nan",
            UnaryOp::IsNotNull => "is not null",
            UnaryOp::IsNotNan => "is not nan",
        }
    }

    /// The operator's name in the structured JSON form.
    pub fn structured_name(self) -> &'static str {
        match self {
            UnaryOp::IsNull => "IS_NULL",
            UnaryOp::IsNan => "IS_NAN",
            UnaryOp::IsNotNull => "IS_NOT_NULL",
            UnaryOp::IsNotNan => "IS_NOT_NAN",
        }
    }
}

/// A filter: a comparison of one field, or an AND/OR of filters. There is no NOT node: the
/// text dialect's `not` is pushed down into the operators Firestore can negate.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `field op value`. For `in`, `not in` and `array_contains_any` the value is an array.
    Field {
        field: FieldPath,
        op: FieldOp,
        value: Value,
    },
    /// `field is [not] null|nan`.
    Unary { field: FieldPath, op: UnaryOp },
    /// All of the filters.
    And(Vec<Filter>),
    /// Any of the filters.
    Or(Vec<Filter>),
}

impl Filter {
    /// A field filter.
    pub fn field(field: FieldPath, op: FieldOp, value: Value) -> Filter {
        Filter::Field { field, op, value }
    }

    /// The field and unary filters inside this filter, depth first.
    pub fn leaves(&self) -> Vec<&Filter> {
        let mut out = Vec::new();
        self.collect_leaves(&mut out);
        out
    }

    fn collect_leaves<'a>(&'a self, out: &mut Vec<&'a Filter>) {
        match self {
            Filter::And(children) | Filter::Or(children) => {
                for child in children {
                    child.collect_leaves(out);
                }
            }
            leaf => out.push(leaf),
        }
    }

    /// The field a leaf filter tests (`None` for AND/OR).
    pub fn leaf_field(&self) -> Option<&FieldPath> {
        match self {
            Filter::Field { field, .. } | Filter::Unary { field, .. } => Some(field),
            Filter::And(_) | Filter::Or(_) => None,
        }
    }

    /// Whether this leaf is an inequality (orders the query by its field).
    pub fn is_inequality(&self) -> bool {
        match self {
            Filter::Field { op, .. } => op.is_inequality(),
            Filter::Unary { op, .. } => op.is_inequality(),
            Filter::And(_) | Filter::Or(_) => false,
        }
    }
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Ascending,
    Descending,
}

impl Direction {
    /// The other direction.
    pub fn reversed(self) -> Direction {
        match self {
            Direction::Ascending => Direction::Descending,
            Direction::Descending => Direction::Ascending,
        }
    }

    /// An ascending comparison's result, read in this direction.
    pub fn apply(self, ordering: std::cmp::Ordering) -> std::cmp::Ordering {
        match self {
            Direction::Ascending => ordering,
            Direction::Descending => ordering.reverse(),
        }
    }
}

/// One `order by` component.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Order {
    pub field: FieldPath,
    pub direction: Direction,
}

impl Order {
    pub fn new(field: FieldPath, direction: Direction) -> Order {
        Order { field, direction }
    }
}

/// A cursor: a position in the query's normalised order, given by values for a prefix of it.
///
/// `start at` / `end at` are inclusive, `start after` / `end before` exclusive. In Firestore's
/// terms, a start cursor has `before = inclusive` and an end cursor `before = !inclusive`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    pub values: Vec<Value>,
    pub inclusive: bool,
}

/// How many results to keep, from the front or from the back of the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The first `n` results (`limit n`).
    First(u32),
    /// The last `n` results, still returned in the query's order (`limit last n`, Firestore's
    /// `limitToLast`).
    Last(u32),
}

impl Limit {
    /// The number of results kept.
    pub fn count(self) -> u32 {
        match self {
            Limit::First(n) | Limit::Last(n) => n,
        }
    }
}

/// A collection or collection group query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub source: Source,
    pub selection: Selection,
    pub filter: Option<Filter>,
    /// The explicit order; see [`Query::normalized_order`] for the one the query runs in.
    pub order_by: Vec<Order>,
    pub start: Option<Cursor>,
    pub end: Option<Cursor>,
    /// Results skipped (after the cursors, before the limit).
    pub offset: u32,
    pub limit: Option<Limit>,
}

impl Query {
    /// `select * from source`: every document of the source, in name order.
    pub fn new(source: Source) -> Query {
        Query {
            source,
            selection: Selection::Documents,
            filter: None,
            order_by: Vec::new(),
            start: None,
            end: None,
            offset: 0,
            limit: None,
        }
    }

    /// The aggregations, if this is an aggregation query.
    pub fn aggregations(&self) -> Option<&[Aggregation]> {
        match &self.selection {
            Selection::Aggregations(aggregations) => Some(aggregations),
            _ => None,
        }
    }
}
