//! The one rule for the regular expressions a tool's schemas hold (`pattern`
//! values, `patternProperties` keys): how long one may be, which constructs
//! it may use, and what compiling it may cost, judged before the schema
//! compiler sees it.
//!
//! Two costs are bounded. **Compiling**: a regex's **weight** is the
//! program size the regex crate's compiler would build for it (every
//! counted repetition written out, every character class as its UTF-8
//! byte sequences); compile time grows linearly with it. **Matching**: the
//! schema compiler uses the regex crate alone, whose search is linear in
//! the string as long as its lazy DFA's cache holds the states the search
//! needs; each pattern's whole DFA is built once here under
//! [`MATCH_DFA_BYTES`], so a pattern whose DFA would thrash that cache
//! (`a{3000}[^a]` took 3.4 s on 128 KiB, falling back to the NFA) is
//! refused. Lookarounds and backreferences are refused with a reason (the
//! engine has none; fancy-regex's are quadratic: `(?=(a+))\1b` took 11 s on
//! 64 KiB, and a backtracking error made jsonschema re-run the whole
//! validation up to 64 times).

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
/// compiles in at most ~50 ms; `[\s\S]{10000}` (270,001) is over. The
/// weight adds the pattern's DFA bytes / 4 ([`MATCH_DFA_BYTES`]), so a
/// plugin's budget bounds the DFA builds too.
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
    #[error("needs a DFA of more than {limit} bytes to match in time linear in the string (regex DFA limit; bound lengths with minLength/maxLength, not counted repetitions)")]
    TooManyStates { limit: usize },
    #[error("compiles to more than {limit} NFA states, more than a DFA's cache can search in linear time (regex NFA limit)")]
    TooManyNfaStates { limit: usize },
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
    // Translated from ECMA-262 as the schema compiler does; parsed by
    // fancy-regex, whose tree names the constructs refused.
    let translated =
        jsonschema_regex::to_rust_regex(pattern).map_err(|()| PatternError::Invalid)?;
    let tree = Expr::parse_tree(&translated).map_err(|_| PatternError::Invalid)?;
    let program = Scale { limit, leaves: 0 }.expr(&tree.expr)?;
    let automaton = linear_match_dfa_bytes(&translated)? as u64 / DFA_BYTES_PER_UNIT;
    let weight = program.saturating_add(automaton);
    if weight > limit {
        return Err(PatternError::TooHeavy { limit });
    }
    Ok(weight)
}

/// Bytes the whole DFA of one pattern (unanchored, as `pattern` searches)
/// may take, and its construction too: ~12 ms at most to build or refuse
/// here. The schema compiler's lazy DFA gets twice this as its cache, so it
/// never clears and gives up. `^[a-zA-Z0-9_-]{1,64}$` needs 4.5 KB,
/// `^[\p{L}\p{N}_-]+$` 171 KB; `^[\p{L}\p{N}_-]{1,64}$` needs 10.8 MB
/// (write the length as `maxLength`).
pub const MATCH_DFA_BYTES: usize = 256 << 10;

/// DFA bytes that weigh one unit: building them costs about what compiling
/// that weight does, so a plugin's weight budget bounds both.
const DFA_BYTES_PER_UNIT: u64 = 4;

/// Most NFA states a pattern may compile to, forward and reversed (the
/// engine's reverse strategies search backwards). A lazy DFA needs a cache
/// of at least ~27 bytes a NFA state: past ~19,000 states it does not fit
/// its cache, is never built, and every match runs on the NFA at up to one
/// step per state per byte. `(?:[ab]*){10000}c`, whose DFA has 4 states,
/// took 0.27 s on a 1 KiB string (a helper's find).
pub const MAX_NFA_STATES: usize = 8_000;

/// Proves the pattern matches in linear time, as the schema compiler's
/// regex engine will run it, and returns its DFA's size: its NFA, forward
/// and reversed, has at most [`MAX_NFA_STATES`] and a lazy DFA with the
/// engine's cache can be built on each; its whole unanchored DFA fits
/// [`MATCH_DFA_BYTES`] (the work stops at the limit), so the lazy DFA never
/// clears its cache and gives up. A Unicode word boundary is refused: the
/// DFA quits on the first non-ASCII byte and the search falls back to the
/// NFA.
fn linear_match_dfa_bytes(translated: &str) -> Result<usize, PatternError> {
    use regex_automata::dfa::{dense, StartKind};
    use regex_automata::{hybrid, nfa::thompson};
    let refused = |e: PatternError| {
        if translated.contains("\\b") || translated.contains("\\B") {
            return PatternError::Unsupported {
                construct: "a word boundary (`\\b`, `\\B`)",
            };
        }
        e
    };
    let dfa_limit = PatternError::TooManyStates {
        limit: MATCH_DFA_BYTES,
    };
    let nfa_limit = PatternError::TooManyNfaStates {
        limit: MAX_NFA_STATES,
    };
    let lazy = hybrid::dfa::Config::new()
        .cache_capacity(2 * MATCH_DFA_BYTES)
        .skip_cache_capacity_check(false);
    let mut forward = None;
    for reverse in [false, true] {
        let config = thompson::Config::new()
            .nfa_size_limit(Some(crate::schema_limits::PATTERN_SIZE_LIMIT))
            .shrink(false)
            .reverse(reverse);
        // A reversed NFA has no capture states (as the engine builds it).
        let config = match reverse {
            true => config.which_captures(thompson::WhichCaptures::None),
            false => config,
        };
        let nfa = thompson::Compiler::new()
            .configure(config)
            .build(translated)
            .map_err(|_| nfa_limit.clone())?;
        if nfa.states().len() > MAX_NFA_STATES {
            return Err(nfa_limit);
        }
        hybrid::dfa::Builder::new()
            .configure(lazy.clone())
            .build_from_nfa(nfa.clone())
            .map_err(|_| refused(nfa_limit.clone()))?;
        forward.get_or_insert(nfa);
    }
    let config = dense::Config::new()
        .start_kind(StartKind::Unanchored)
        .minimize(false)
        .dfa_size_limit(Some(MATCH_DFA_BYTES))
        .determinize_size_limit(Some(MATCH_DFA_BYTES));
    let nfa = forward.expect("built above");
    dense::Builder::new()
        .configure(config)
        .build_from_nfa(&nfa)
        .map(|dfa| dfa.memory_usage())
        .map_err(|_| refused(dfa_limit))
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
            Expr::Empty | Expr::Assertion(_) => self.leaf(1),
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
            Expr::LookAround(..) | Expr::Backref { .. } => Err(PatternError::Unsupported {
                construct: "a lookaround or backreference (matched by backtracking, in time up to quadratic in the string)",
            }),
            Expr::AtomicGroup(_) | Expr::KeepOut => Err(PatternError::Unsupported {
                construct: "an atomic group or `\\K`",
            }),
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

    /// A piece fancy-regex's parser leaves as regex-crate syntax (a class,
    /// an escape), weighed as the regex crate parses it.
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
