//! The one rule for the regular expressions a tool's schemas hold (`pattern`
//! values, `patternProperties` keys): how long one may be, which constructs
//! it may use, and what compiling it may cost, judged before the schema
//! compiler sees it.
//!
//! jsonschema compiles a pattern by several routes: the whole pattern in
//! fancy-regex (which hands each lookaround-free piece to the regex crate,
//! each under its own size limit), each part of a `^(?=…)(?=…)…` chain as a
//! regex of its own (under the regex crate's default 10 MiB limit, not ours),
//! a literal sequence whose fallback regex is compiled at its first match.
//! An engine's size limit bounds one program, not how many a pattern makes.
//! So the bound here is on the pattern itself, whatever route compiles it:
//! its **weight**, the program size the regex crate's compiler would build
//! for it whole (every counted repetition written out, every character class
//! as its UTF-8 byte sequences). Each route compiles the pattern or disjoint
//! parts of it, so each compiles at most this weight, and compile time grows
//! linearly with it (`bench`-style numbers in the tests).

use fancy_regex::Expr;
use regex_syntax::hir::{Class, Hir, HirKind};

/// Longest accepted regex, in bytes. Real patterns (an e-mail address, a
/// semantic version) stay well under 1 KiB; the bound keeps the schema
/// compiler's own passes over the text (ECMA translation, its syntax check)
/// short.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// Most `\cX` control escapes in one regex. The schema compiler's ECMA
/// translation rewrites each one with a pass over the whole pattern, so
/// their cost is quadratic: 1,300 of them (3.9 KB) took ~35 ms to translate,
/// twice per compile. Real patterns write control characters as `\x01`.
pub const MAX_CONTROL_ESCAPES: usize = 32;

/// Heaviest accepted regex (see the module doc). Compile time per unit is
/// at most ~0.2 µs (measured on a 2-core Xeon: `[\s\S]{2000}` weighs 54,000
/// and compiles in 5–7 ms, `a{100000}` 100,000 in 8–13 ms), so one pattern
/// compiles in at most ~50 ms. Unicode classes weigh more than they cost
/// (the compiler shares their UTF-8 suffixes): `^[\p{L}\p{N}_-]{1,64}$`
/// weighs 203,524 and compiles in ~2 ms, so it still fits;
/// `[\s\S]{10000}` (270,001) does not.
pub const MAX_PATTERN_WEIGHT: u64 = 250_000;

/// Why a schema regex was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("is {len} bytes, over the {limit}-byte regex length limit")]
    TooLong { len: usize, limit: usize },
    #[error(
        "has {count} `\\c` control escapes, over the limit of {limit} (write them as `\\x01`…)"
    )]
    TooManyControlEscapes { count: usize, limit: usize },
    #[error("is not a regular expression the schema compiler accepts")]
    Invalid,
    #[error("uses {construct}, which schema regexes may not (not ECMA-262)")]
    Unsupported { construct: &'static str },
    #[error("would compile to a program of more than {limit} units (regex weight limit)")]
    TooHeavy { limit: u64 },
}

/// The `regex` format as values are checked against it (drafts 4 to 7
/// check formats by default): ECMA-262 syntax, in at most
/// [`MAX_PATTERN_BYTES`]. The syntax check's time grows with the square of
/// the value's named groups (125 ms at 180 KB), so a 16 MiB value would hold
/// a validating thread for a quarter of an hour.
pub fn is_regex_format(value: &str) -> bool {
    value.len() <= MAX_PATTERN_BYTES && jsonschema_regex::is_valid_ecma_regex(value)
}

/// The weight of `pattern` (as written in the schema, ECMA-262 syntax), at
/// most `limit`; the work of weighing stops where the limit is passed.
pub fn weigh(pattern: &str, limit: u64) -> Result<u64, PatternError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(PatternError::TooLong {
            len: pattern.len(),
            limit: MAX_PATTERN_BYTES,
        });
    }
    let escapes = pattern.matches("\\c").count();
    if escapes > MAX_CONTROL_ESCAPES {
        return Err(PatternError::TooManyControlEscapes {
            count: escapes,
            limit: MAX_CONTROL_ESCAPES,
        });
    }
    if sets_case_insensitive(pattern) {
        return Err(CASE_INSENSITIVE);
    }
    let whole = weigh_translated(pattern, limit)?;
    Ok(whole.max(weigh_lookahead_parts(pattern, limit)?))
}

/// `pattern` translated from ECMA-262 as the schema compiler does, parsed
/// by fancy-regex and weighed.
fn weigh_translated(pattern: &str, limit: u64) -> Result<u64, PatternError> {
    let translated =
        jsonschema_regex::to_rust_regex(pattern).map_err(|()| PatternError::Invalid)?;
    let tree = Expr::parse_tree(&translated).map_err(|_| PatternError::Invalid)?;
    let mut scale = Scale { limit, leaves: 0 };
    scale.expr(&tree.expr)
}

/// A `^(?=A)(?=B)…Z` chain is also compiled part by part, and each part is
/// translated on its own: the whole pattern, having a lookaround, is not
/// (an ECMA `.` becomes `[^\n\r\u2028\u2029]` in a part, heavier than
/// fancy-regex's own). The parts in all, where they translate; a part that
/// does not makes the compiler take the whole pattern instead.
fn weigh_lookahead_parts(pattern: &str, limit: u64) -> Result<u64, PatternError> {
    let Some(parts) = jsonschema_regex::split_leading_lookaheads(pattern) else {
        return Ok(0);
    };
    let mut total = 0u64;
    for part in &parts {
        match weigh_translated(part, limit) {
            Ok(weight) => total = total.saturating_add(weight),
            Err(e @ PatternError::TooHeavy { .. }) => return Err(e),
            Err(_) => return Ok(0),
        }
        if total > limit {
            return Err(PatternError::TooHeavy { limit });
        }
    }
    Ok(total)
}

const CASE_INSENSITIVE: PatternError = PatternError::Unsupported {
    construct: "case-insensitive matching (an `i` flag)",
};

/// Whether `pattern` turns on case-insensitive matching (`(?i)`,
/// `(?i:…)`, `(?-x+i)`…). Refused from the text, before anything is
/// parsed: the regex parser folds each case-insensitive class code point
/// by code point, so `(?i)\p{Any}` 583 times (4 KiB) took 2.3 s to parse
/// and 4.6 s to compile, whatever its weight. JSON Schema's ECMA-262
/// patterns carry no flags; an `i` inside a character class is refused
/// too (rare, and the text is all there is to go on here).
fn sets_case_insensitive(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' => escaped = true,
            b'(' if bytes.get(i + 1) == Some(&b'?') => {
                let flags = bytes[i + 2..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphabetic() || **c == b'-');
                let (mut has_i, mut len) = (false, 0);
                for &c in flags {
                    has_i |= c == b'i';
                    len += 1;
                }
                if has_i && matches!(bytes.get(i + 2 + len), Some(b':' | b')')) {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// Weighs parse trees against one limit. `leaves` sums every leaf's own
/// weight once: it bounds the work of weighing (a class is weighed by
/// walking its ranges) even where a repetition of zero hides the leaf.
struct Scale {
    limit: u64,
    leaves: u64,
}

impl Scale {
    fn check(&self, weight: u64) -> Result<u64, PatternError> {
        if weight > self.limit {
            return Err(PatternError::TooHeavy { limit: self.limit });
        }
        Ok(weight)
    }

    fn leaf(&mut self, weight: u64) -> Result<u64, PatternError> {
        self.leaves = self.check(self.leaves.saturating_add(weight))?;
        self.check(weight)
    }

    fn sum<'a, T: 'a>(
        &mut self,
        items: impl IntoIterator<Item = &'a T>,
        each: impl Fn(&mut Self, &'a T) -> Result<u64, PatternError>,
    ) -> Result<u64, PatternError> {
        let mut total = 1u64;
        for item in items {
            let weight = each(self, item)?;
            total = self.check(total.saturating_add(weight))?;
        }
        Ok(total)
    }

    /// `child` written out `times` times.
    fn repeat(&self, child: u64, times: u64) -> Result<u64, PatternError> {
        self.check(child.saturating_mul(times.max(1)).saturating_add(1))
    }

    fn expr(&mut self, e: &Expr) -> Result<u64, PatternError> {
        match e {
            Expr::Empty | Expr::Assertion(_) | Expr::Backref { .. } | Expr::KeepOut => self.leaf(1),
            Expr::Any { newline: true, .. } => self.leaf(any_char_weight()),
            // As the ECMA translation writes `.`: `[^\n\r\u2028\u2029]`.
            Expr::Any { newline: false, .. } => self.leaf(ecma_dot_weight()),
            Expr::GeneralNewline { .. } => self.leaf(8),
            Expr::Literal { casei: true, .. } | Expr::Delegate { casei: true, .. } => {
                Err(CASE_INSENSITIVE)
            }
            Expr::Literal { val, .. } => self.leaf(val.len() as u64),
            Expr::LiteralBytes { bytes } => self.leaf(bytes.len() as u64),
            Expr::Concat(items) | Expr::Alt(items) => self.sum(items, Self::expr),
            Expr::Group(child) => self.group(child),
            Expr::LookAround(child, _) | Expr::AtomicGroup(child) => self.group(child),
            Expr::Repeat { child, lo, hi, .. } => {
                let child = self.expr(child)?;
                self.repeat(
                    child,
                    copies(*lo as u64, (*hi != usize::MAX).then_some(*hi as u64)),
                )
            }
            Expr::Delegate { inner, .. } => self.delegate(inner),
            Expr::Conditional { .. } | Expr::BackrefExistsCondition { .. } => {
                Err(PatternError::Unsupported {
                    construct: "a conditional",
                })
            }
            Expr::SubroutineCall(_) | Expr::BackrefWithRelativeRecursionLevel { .. } => {
                Err(PatternError::Unsupported {
                    construct: "a subroutine call",
                })
            }
            Expr::ContinueFromPreviousMatchEnd
            | Expr::BacktrackingControlVerb(_)
            | Expr::Absent(_) => Err(PatternError::Unsupported {
                construct: "a backtracking control",
            }),
            // The parser resolves its AST nodes before it returns.
            Expr::DefineGroup { .. } | Expr::AstNode(..) => Err(PatternError::Unsupported {
                construct: "a group definition",
            }),
        }
    }

    fn group(&mut self, child: &Expr) -> Result<u64, PatternError> {
        let child = self.expr(child)?;
        self.check(child.saturating_add(2))
    }

    /// A piece fancy-regex hands to the regex crate as written.
    fn delegate(&mut self, inner: &str) -> Result<u64, PatternError> {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(inner)
            .map_err(|_| PatternError::Invalid)?;
        self.hir(&hir)
    }

    fn hir(&mut self, h: &Hir) -> Result<u64, PatternError> {
        match h.kind() {
            HirKind::Empty | HirKind::Look(_) => self.leaf(1),
            HirKind::Literal(l) => self.leaf(l.0.len() as u64),
            HirKind::Class(Class::Bytes(c)) => self.leaf(c.ranges().len() as u64),
            HirKind::Class(Class::Unicode(c)) => {
                let mut weight = 0u64;
                for r in c.ranges() {
                    weight = weight.saturating_add(utf8_weight(r.start(), r.end()));
                    self.check(self.leaves.saturating_add(weight))?;
                }
                self.leaf(weight)
            }
            HirKind::Repetition(r) => {
                let child = self.hir(&r.sub)?;
                self.repeat(child, copies(r.min.into(), r.max.map(u64::from)))
            }
            HirKind::Capture(c) => {
                let child = self.hir(&c.sub)?;
                self.check(child.saturating_add(2))
            }
            HirKind::Concat(items) | HirKind::Alternation(items) => self.sum(items, Self::hir),
        }
    }
}

/// Copies of its child a counted repetition compiles to: `x{n,m}` is `n`
/// required and `m - n` optional copies, `x{n,}` is `n` and a loop.
fn copies(lo: u64, hi: Option<u64>) -> u64 {
    hi.unwrap_or(lo.saturating_add(1)).max(lo)
}

/// Byte-range transitions that match the characters `start..=end` in UTF-8.
fn utf8_weight(start: char, end: char) -> u64 {
    regex_syntax::utf8::Utf8Sequences::new(start, end)
        .map(|s| s.len() as u64)
        .sum()
}

fn any_char_weight() -> u64 {
    utf8_weight('\0', char::MAX)
}

/// ECMA-262's `.`: anything but `\n`, `\r`, U+2028 and U+2029.
fn ecma_dot_weight() -> u64 {
    [
        ('\0', '\u{9}'),
        ('\u{B}', '\u{C}'),
        ('\u{E}', '\u{2027}'),
        ('\u{202A}', char::MAX),
    ]
    .iter()
    .map(|&(a, b)| utf8_weight(a, b))
    .sum()
}

#[cfg(test)]
mod tests;
