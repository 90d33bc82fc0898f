//! Literal rules of the text dialect that sqlparser's tokenizer leaves to us (it runs with
//! unescaping off): string escapes and the typed-JSON number rule.

use crate::value::Value;

/// A number by the typed-JSON rule: integer syntax (no `.`, `e`, `E`) that fits int64 is an
/// integer, anything else a finite double.
pub(crate) fn number(text: &str) -> Result<Value, String> {
    if !text.contains(['.', 'e', 'E']) {
        if let Ok(i) = text.parse::<i64>() {
            return Ok(Value::Integer(i));
        }
    }
    match text.parse::<f64>() {
        Ok(d) if d.is_finite() => Ok(Value::Double(d)),
        _ => Err(format!(
            "number {text} is out of range for a double (use {{\"$double\": \"Infinity\"}})"
        )),
    }
}

/// The text of a string literal from its raw form: a doubled quote is one quote; backslash
/// escapes as in JSON (`\" \' \\ \/ \b \f \n \r \t \uXXXX`).
pub(crate) fn unescape(raw: &str, quote: char) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = match chars.next() {
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some('r') => '\r',
                    Some('b') => '\u{8}',
                    Some('f') => '\u{c}',
                    Some(c @ ('\\' | '/' | '\'' | '"')) => c,
                    Some('u') => unicode_escape(&mut chars)?,
                    Some(other) => {
                        return Err(format!(
                            "unknown escape \\{other} in a string (use \\\\ for a backslash)"
                        ))
                    }
                    None => return Err("a string ends with a lone backslash".into()),
                };
                out.push(escaped);
            }
            c if c == quote => {
                // The tokenizer only leaves doubled quotes inside a string.
                chars.next();
                out.push(c);
            }
            c => out.push(c),
        }
    }
    if out.contains('\0') {
        return Err("a string contains U+0000, which cannot be stored".into());
    }
    Ok(out)
}

fn hex4(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> std::result::Result<u32, String> {
    let digits: String = (0..4).filter_map(|_| chars.next()).collect();
    if digits.len() != 4 {
        return Err("\\u needs four hex digits".into());
    }
    u32::from_str_radix(&digits, 16).map_err(|_| format!("\\u{digits} is not four hex digits"))
}

fn unicode_escape(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> std::result::Result<char, String> {
    let first = hex4(chars)?;
    let code = if (0xD800..0xDC00).contains(&first) {
        if chars.next() != Some('\\') || chars.next() != Some('u') {
            return Err("a \\u high surrogate must be followed by a \\u low surrogate".into());
        }
        let second = hex4(chars)?;
        if !(0xDC00..0xE000).contains(&second) {
            return Err("a \\u high surrogate must be followed by a \\u low surrogate".into());
        }
        0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
    } else {
        first
    };
    char::from_u32(code).ok_or_else(|| format!("\\u{first:04x} is not a character"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(number("0"), Ok(Value::Integer(0)));
        assert_eq!(number("-0"), Ok(Value::Integer(0)));
        assert_eq!(number("-9223372036854775808"), Ok(Value::Integer(i64::MIN)));
        assert_eq!(
            number("9223372036854775808"),
            Ok(Value::Double(9_223_372_036_854_775_808.0))
        );
        assert_eq!(number("1."), Ok(Value::Double(1.0)));
        assert_eq!(number("-.5"), Ok(Value::Double(-0.5)));
        assert_eq!(number("2E2"), Ok(Value::Double(200.0)));
        assert!(number("1e400").is_err());
        assert!(number("-1e400").is_err());
    }

    #[test]
    fn escapes() {
        assert_eq!(unescape("a''b", '\''), Ok("a'b".into()));
        assert_eq!(unescape("a\"\"b", '"'), Ok("a\"b".into()));
        assert_eq!(unescape("a''b", '"'), Ok("a''b".into()));
        assert_eq!(
            unescape(r#"\n\t\r\b\f\\\/\'\""#, '"'),
            Ok("\n\t\r\u{8}\u{c}\\/'\"".into())
        );
        assert_eq!(unescape(r"\u00e9\u20AC", '"'), Ok("é€".into()));
        assert_eq!(unescape(r"\ud83d\ude00", '"'), Ok("😀".into()));
        for bad in [
            r"\x",
            r"\u12",
            r"\u00zz",
            r"\ud83d",
            r"\ud83dx",
            r"\ud83d\u0041",
            r"\udc00",
            r"\u0000",
            "\\",
        ] {
            assert!(unescape(bad, '"').is_err(), "{bad}");
        }
    }
}
