//! The SQL back end: for each method, one boolean SQL expression over the `request` and
//! `resource` typed-JSON `jsonb` values, calling the primitives as SQL functions.
//!
//! # Naming
//! Primitive `p` of [`crate::prim::CATALOG`] is `docstore.rules_<p>(jsonb, ...) RETURNS jsonb`
//! (IMMUTABLE STRICT; `list`, `map` and `path` take `VARIADIC jsonb[]`). Besides those:
//! `docstore.rules_truth(jsonb) RETURNS boolean` (a JSON boolean's value, NULL otherwise) and
//! `docstore.rules_lookup(kind text, path jsonb, database text) RETURNS jsonb` (get / exists /
//! getAfter / existsAfter of a document of the request's `database`, STABLE, SECURITY
//! DEFINER; at most 10 distinct lookups per read method, checked when a ruleset is set).
//!
//! # Errors as NULL
//! SQL NULL is Firestore's error. Strict functions propagate it. `&&` and `||` are SQL's
//! `AND` and `OR` over `rules_truth(..)`: `NULL AND false` is false, `NULL OR true` is true,
//! `NULL AND true` and `NULL OR false` are NULL, exactly Firestore's absorbing rules
//! (`error && false` is false whichever side errs). `?:` is a simple `CASE rules_truth(c)
//! WHEN true .. WHEN false .. END`, which is NULL (error) for a NULL condition, where
//! `CASE WHEN NULL` would silently take the `ELSE` branch. `!` is the strict primitive `not`
//! (SQL `NOT NULL` is NULL too, but a non-boolean operand must be an error, not a value).
//! Each method's expression is `COALESCE(rule OR rule ..., false)`: an error at the top
//! denies.
//!
//! # Quoting
//! Constants are typed-JSON text printed by [`crate::prim::to_json`] in a dollar-quoted
//! literal whose tag does not occur in the text, cast to `jsonb`: no setting
//! (`standard_conforming_strings`) and no text changes their meaning. Identifiers given by
//! the caller are double-quoted with `"` doubled.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::ir::{Ir, Rule, Ruleset};
use crate::parse::ast::{Method, Version};
use crate::prim::{self, Arity, Val};

/// The SQL of a ruleset: one boolean expression per method.
#[derive(Debug, Clone)]
pub struct SqlRules {
    pub methods: Vec<MethodSql>,
}

#[derive(Debug, Clone)]
pub struct MethodSql {
    pub method: Method,
    /// A boolean expression, never NULL (errors deny).
    pub expression: String,
    /// Distinct `get()`/`exists()` argument expressions in it (the extension refuses
    /// more than 10, 20 for batch writes, as docs/rules.md says).
    pub lookups: usize,
}

/// A SQL identifier, double-quoted (Postgres' `quote_ident` rule, always quoting).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A `jsonb` constant: the value's typed JSON in a dollar-quoted literal.
pub fn jsonb_literal(v: &Val) -> String {
    let text = prim::to_json(v).to_string();
    let mut tag = String::from("$j$");
    let mut n = 0;
    // The first occurrence of the tag in the text and the closing tag together must be the
    // closing tag itself: a text ending in `$j` would otherwise close early against it.
    while format!("{text}{tag}").find(&tag) != Some(text.len()) {
        n += 1;
        tag = format!("$j{n}$");
    }
    format!("{tag}{text}{tag}::jsonb")
}

/// Generate the SQL of `ruleset`, reading the `request` and `resource` jsonb from the
/// identifiers `request` and `resource` (quoted here).
pub fn generate(ruleset: &Ruleset, request: &str, resource: &str) -> SqlRules {
    let version = match ruleset.version {
        Version::V1 => 1,
        Version::V2 => 2,
    };
    let g = Gen {
        request: quote_ident(request),
        resource: quote_ident(resource),
        version,
    };
    let methods = Method::ALL
        .iter()
        .map(|&m| {
            let rules: Vec<&Rule> = ruleset
                .rules
                .iter()
                .filter(|r| r.methods.contains(&m))
                .collect();
            let mut lookups = BTreeSet::new();
            let parts: Vec<String> = rules.iter().map(|r| g.rule(r, &mut lookups)).collect();
            let expression = if parts.is_empty() {
                "false".to_owned()
            } else {
                format!("COALESCE({}, false)", parts.join(" OR "))
            };
            MethodSql {
                method: m,
                expression,
                lookups: lookups.len(),
            }
        })
        .collect();
    SqlRules { methods }
}

struct Gen {
    request: String,
    resource: String,
    version: i64,
}

impl Gen {
    fn rule(&self, r: &Rule, lookups: &mut BTreeSet<String>) -> String {
        let m = format!(
            "docstore.rules_match_path({}, {}, docstore.rules_member({}, {}))",
            jsonb_literal(&Val::Str(r.pattern.clone())),
            jsonb_literal(&Val::Int(self.version)),
            self.request,
            jsonb_literal(&Val::str("path"))
        );
        let cond = self.boolean(&r.condition, &m, lookups);
        format!("({m} <> 'null'::jsonb AND {cond})")
    }

    /// A SQL boolean (NULL = error).
    fn boolean(&self, ir: &Ir, m: &str, lookups: &mut BTreeSet<String>) -> String {
        match ir {
            Ir::Lit(Val::Bool(b)) => b.to_string(),
            Ir::And(a, b) => format!(
                "({} AND {})",
                self.boolean(a, m, lookups),
                self.boolean(b, m, lookups)
            ),
            Ir::Or(a, b) => format!(
                "({} OR {})",
                self.boolean(a, m, lookups),
                self.boolean(b, m, lookups)
            ),
            other => format!("docstore.rules_truth({})", self.value(other, m, lookups)),
        }
    }

    /// A SQL jsonb (NULL = error).
    fn value(&self, ir: &Ir, m: &str, lookups: &mut BTreeSet<String>) -> String {
        match ir {
            Ir::Lit(v) => jsonb_literal(v),
            Ir::Request => self.request.clone(),
            Ir::Resource => self.resource.clone(),
            Ir::Wildcard(name) => format!(
                "docstore.rules_member({m}, {})",
                jsonb_literal(&Val::Str(name.clone()))
            ),
            Ir::Prim(name, args) => {
                let args: Vec<String> = args.iter().map(|a| self.value(a, m, lookups)).collect();
                let mut out = format!("docstore.rules_{name}(");
                if prim::arity(name) == Some(Arity::Variadic) {
                    let _ = write!(out, "VARIADIC ARRAY[{}]::jsonb[]", args.join(", "));
                } else {
                    out.push_str(&args.join(", "));
                }
                out.push(')');
                out
            }
            Ir::And(..) | Ir::Or(..) => format!("to_jsonb({})", self.boolean(ir, m, lookups)),
            Ir::Cond(c, a, b) => format!(
                "(CASE docstore.rules_truth({}) WHEN true THEN {} WHEN false THEN {} END)",
                self.value(c, m, lookups),
                self.value(a, m, lookups),
                self.value(b, m, lookups)
            ),
            Ir::Lookup(kind, p) => {
                let path = self.value(p, m, lookups);
                lookups.insert(path.clone());
                // The request's database (the second segment of `request.path`): as in the
                // evaluator, a path into another database is an error, not a read.
                format!(
                    "docstore.rules_lookup('{}', {path}, {}->'path'->'$path'->>1)",
                    kind.name(),
                    self.request
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(src: &str, method: Method) -> MethodSql {
        let rs = crate::compile(src).unwrap();
        generate(&rs, "request", "resource")
            .methods
            .into_iter()
            .find(|m| m.method == method)
            .unwrap()
    }

    const HEAD: &str = "rules_version = '2'; service cloud.firestore { match /databases/{database}/documents { match /users/{uid} {";

    #[test]
    fn shape_of_a_rule() {
        let m = sql(
            &format!("{HEAD} allow read: if request.auth.uid == uid; }} }} }}"),
            Method::Get,
        );
        assert_eq!(
            m.expression,
            "COALESCE((docstore.rules_match_path($j$\"/databases/{database}/documents/users/{uid}\"$j$::jsonb, $j$2$j$::jsonb, docstore.rules_member(\"request\", $j$\"path\"$j$::jsonb)) <> 'null'::jsonb AND docstore.rules_truth(docstore.rules_eq(docstore.rules_member(docstore.rules_member(\"request\", $j$\"auth\"$j$::jsonb), $j$\"uid\"$j$::jsonb), docstore.rules_member(docstore.rules_match_path($j$\"/databases/{database}/documents/users/{uid}\"$j$::jsonb, $j$2$j$::jsonb, docstore.rules_member(\"request\", $j$\"path\"$j$::jsonb)), $j$\"uid\"$j$::jsonb)))), false)"
        );
        assert_eq!(
            sql(&format!("{HEAD} allow read; }} }} }}"), Method::Delete).expression,
            "false"
        );
    }

    #[test]
    fn logic_and_ternary_keep_error_semantics() {
        let m = sql(
            &format!("{HEAD} allow write: if (resource.data.a || false) && (resource.data.b ? 1 : 2) == 1; }} }} }}"),
            Method::Update,
        );
        assert!(m.expression.contains(" OR false)"), "{}", m.expression);
        assert!(m.expression.contains(" AND "), "{}", m.expression);
        assert!(
            m.expression.contains("(CASE docstore.rules_truth(docstore.rules_member(docstore.rules_member(\"resource\""),
            "{}",
            m.expression
        );
        assert!(m
            .expression
            .contains("WHEN true THEN $j$1$j$::jsonb WHEN false THEN $j$2$j$::jsonb END)"));
        assert!(!m.expression.contains("ELSE"));
    }

    #[test]
    fn constants_are_quoted_and_lookups_counted() {
        let m = sql(
            &format!("{HEAD} allow get: if get(/databases/$(database)/documents/admins/$(request.auth.uid)).data.tag == \"a'$j$b\" && exists(/databases/$(database)/documents/x/y) && exists(/databases/$(database)/documents/x/y); }} }} }}"),
            Method::Get,
        );
        assert!(
            m.expression.contains("$j1$\"a'$j$b\"$j1$::jsonb"),
            "{}",
            m.expression
        );
        assert_eq!(m.lookups, 2);
        assert!(m
            .expression
            .contains("docstore.rules_lookup('get', docstore.rules_path(VARIADIC ARRAY["));
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn every_function_called_is_in_the_catalog() {
        let m = sql(
            &format!("{HEAD} allow get: if request.resource.data.keys().hasAll(['a']) && math.abs(-1) == 1 && [1, resource.data.x].size() == 2 && {{'k': uid}}.k is string && !(uid in ['x']); }} }} }}"),
            Method::Get,
        );
        let mut rest = m.expression.as_str();
        while let Some(i) = rest.find("docstore.rules_") {
            let name: String = rest[i + 15..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                prim::arity(&name).is_some() || name == "truth" || name == "lookup",
                "{name}"
            );
            rest = &rest[i + 15..];
        }
        assert!(m
            .expression
            .contains("docstore.rules_list(VARIADIC ARRAY[$j$1$j$::jsonb, "));
    }
}
