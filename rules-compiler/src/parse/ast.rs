//! The syntax tree, with a span on every node.

use crate::error::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    V1,
    V2,
}

#[derive(Debug, Clone)]
pub struct File {
    pub version: Version,
    pub version_span: Option<Span>,
    pub functions: Vec<Function>,
    pub services: Vec<Service>,
}

#[derive(Debug, Clone)]
pub struct Service {
    pub name: String,
    pub span: Span,
    pub body: Block,
}

/// The contents of a `service` or `match` block.
#[derive(Debug, Clone, Default)]
pub struct Block {
    pub functions: Vec<Function>,
    pub matches: Vec<Match>,
    pub allows: Vec<Allow>,
}

#[derive(Debug, Clone)]
pub struct Match {
    pub path: Vec<Segment>,
    pub span: Span,
    pub body: Block,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SegmentKind {
    Literal(String),
    /// `{name}` (also `{name=*}`): one segment.
    Single(String),
    /// `{name=**}`: a run of segments (one or more in version 1, zero or more in version 2).
    Recursive(String),
}

#[derive(Debug, Clone)]
pub struct Segment {
    pub kind: SegmentKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Get,
    List,
    Create,
    Update,
    Delete,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Get,
        Method::List,
        Method::Create,
        Method::Update,
        Method::Delete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::List => "list",
            Method::Create => "create",
            Method::Update => "update",
            Method::Delete => "delete",
        }
    }

    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }
}

#[derive(Debug, Clone)]
pub struct Allow {
    pub methods: Vec<Method>,
    /// `None`: `allow read;` without a condition (always true).
    pub condition: Option<Expr>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub name_span: Span,
    pub params: Vec<(String, Span)>,
    pub lets: Vec<(String, Span, Expr)>,
    pub body: Expr,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Or => "||",
            BinaryOp::And => "&&",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
        }
    }
}

#[derive(Debug, Clone)]
pub enum PathPart {
    /// A literal segment, URL-decoded.
    Segment(String),
    /// `$(expr)`.
    Expr(Expr),
}

#[derive(Debug, Clone)]
pub enum ExprKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Ident(String),
    Path(Vec<PathPart>),
    List(Vec<Expr>),
    Map(Vec<(Expr, Expr)>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Is(Box<Expr>, String),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Range(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `name(args)`.
    Call(String, Vec<Expr>),
    /// `receiver.name(args)` (also `math.abs(x)`, where the receiver is the namespace).
    Method(Box<Expr>, String, Vec<Expr>),
}

#[derive(Debug, Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    /// Height of the tree under this node (1 for a leaf): the parser bounds it, so every
    /// later stage may recurse.
    pub depth: u32,
}

impl Expr {
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        let mut children = 0;
        kind.for_each_child(|e| children = children.max(e.depth));
        Expr {
            kind,
            span,
            depth: children.saturating_add(1),
        }
    }
}

impl ExprKind {
    /// Call `f` on each direct subexpression, in source order (a method's receiver first).
    pub fn for_each_child<'a>(&'a self, mut f: impl FnMut(&'a Expr)) {
        match self {
            ExprKind::Path(parts) => {
                for p in parts {
                    if let PathPart::Expr(e) = p {
                        f(e);
                    }
                }
            }
            ExprKind::List(items) | ExprKind::Call(_, items) => items.iter().for_each(f),
            ExprKind::Map(entries) => {
                for (k, v) in entries {
                    f(k);
                    f(v);
                }
            }
            ExprKind::Unary(_, e) | ExprKind::Is(e, _) | ExprKind::Member(e, _) => f(e),
            ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => {
                f(a);
                f(b);
            }
            ExprKind::Ternary(a, b, c) | ExprKind::Range(a, b, c) => {
                f(a);
                f(b);
                f(c);
            }
            ExprKind::Method(r, _, args) => {
                f(r);
                args.iter().for_each(f);
            }
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Str(_)
            | ExprKind::Bytes(_)
            | ExprKind::Ident(_) => {}
        }
    }
}
