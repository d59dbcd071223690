use super::*;

fn weight(p: &str) -> Result<u64, PatternError> {
    weigh(p, MAX_PATTERN_WEIGHT)
}

const LOOKAROUND: &str =
    "a lookaround or backreference (matched by backtracking, in time up to quadratic in the string)";

/// Patterns of the kind real schemas hold weigh little and match in
/// linear time.
#[test]
fn real_patterns_are_light() {
    for p in [
        r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$",
        r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-.]+)?$",
        r"^\d{4}-\d{2}-\d{2}$",
        r"^[a-zA-Z0-9_-]{1,64}$",
        r"^https?://",
        r"^[^\s]+$",
        r"(?<year>\d{4})-(?<month>\d{2})",
    ] {
        let w = weight(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(w < 20_000, "{p}: {w}");
    }
    // Unicode classes weigh by their UTF-8 sequences and their DFA; an
    // unbounded run fits, a counted one needs 10.8 MB of DFA and ~88,000
    // NFA states reversed (the length belongs in `maxLength`).
    let unicode = weight(r"^[\p{L}\p{N}_-]+$").unwrap();
    assert!(
        unicode > 10_000 && unicode < MAX_PATTERN_WEIGHT,
        "{unicode}"
    );
    assert_eq!(
        weight(r"^[\p{L}\p{N}_-]{1,64}$"),
        Err(PatternError::TooManyNfaStates {
            limit: MAX_NFA_STATES
        })
    );
}

/// Repetitions are written out, nested ones multiplied: each of these
/// compiles to a program of millions of states (or tries to).
#[test]
fn written_out_repetitions_are_refused() {
    for p in [
        r"[\s\S]{10000}",
        r"(a{1000}){1000}",
        r"(((a{10}){10}){10}){1000}",
        r".{1,20000}",
        r"\p{L}{1000}",
    ] {
        assert_eq!(
            weight(p),
            Err(PatternError::TooHeavy {
                limit: MAX_PATTERN_WEIGHT
            }),
            "{p}"
        );
    }
    // The count is ECMA-262's: `\w` is 63 ASCII characters, four ranges
    // (401 for the program, the rest for its DFA).
    let w = weight(r"\w{100}").unwrap();
    assert!((401..401 + MATCH_DFA_BYTES as u64 / 4).contains(&w), "{w}");
}

/// Matched by fancy-regex's backtracking, these took time quadratic in the
/// string (a helper's measurements: `(?=(a+))\1b` 11 s and `(?<=a.*)x`
/// 9.5 s on 64 KiB of `a`, inline on the executor), and a backtracking
/// error made jsonschema re-run the whole validation up to 64 times. The
/// engine is the regex crate alone; they are refused with the reason.
#[test]
fn backtracking_constructs_are_refused() {
    for p in [
        r"(?=(a+))\1b",
        r"(?<=a.*)x",
        r"a(?![\s\S]*a$)",
        r"^(?=.*\d)(?=.*[a-z])\w{4,}$",
        r"(a*)\1b",
    ] {
        assert_eq!(
            weight(p),
            Err(PatternError::Unsupported {
                construct: LOOKAROUND
            }),
            "{p}"
        );
    }
    // fancy-regex's own syntax, reachable only untranslated: refused too.
    for p in [r"(b)\g<1>", r"(b)?(?(1)c|d)", r"b\Gc", r"(?>ab)", r"b\Kc"] {
        assert!(weight(p).is_err(), "{p}");
    }
}

/// Light by weight, but the search needs more DFA states than the lazy
/// DFA's cache holds, so it clears, gives up and runs the NFA: `a{3000}[^a]`
/// took 3.4 s on 128 KiB of `a`. The whole DFA is built under a limit at
/// load, and such a pattern refused; a Unicode word boundary, which makes
/// the DFA quit on non-ASCII text, too.
#[test]
fn patterns_that_need_a_large_dfa_are_refused() {
    for p in [r"a{3000}[^a]", r"[ab]*a[ab]{20}", r"(x|y)*x(x|y){16}z"] {
        assert_eq!(
            weight(p),
            Err(PatternError::TooManyStates {
                limit: MATCH_DFA_BYTES
            }),
            "{p}"
        );
    }
    assert!(weight(r"a{100}[^a]").is_ok());
    // A DFA of 4 states, but an NFA too large for the lazy DFA's cache:
    // never built, every match ran on the NFA (0.27 s on 1 KiB).
    for p in [r"(?:[ab]*){10000}c", r"(?:[ab]*){5000}c(?:x|y){4000}"] {
        assert_eq!(
            weight(p),
            Err(PatternError::TooManyNfaStates {
                limit: MAX_NFA_STATES
            }),
            "{p}"
        );
    }
    assert!(weight(r"(?:[ab]*){1000}c").is_ok());
    assert!(matches!(
        weight(r"\b[a-z]{30}\d\b"),
        Err(PatternError::Unsupported { construct }) if construct.contains("word boundary")
    ));
}

#[test]
fn length_escapes_and_syntax_are_checked_first() {
    let long = "a".repeat(MAX_PATTERN_BYTES + 1);
    assert_eq!(
        weight(&long),
        Err(PatternError::TooLong {
            len: MAX_PATTERN_BYTES + 1,
            limit: MAX_PATTERN_BYTES
        })
    );
    // Each `\cX` costs the translation a pass over the whole pattern.
    assert!(weight(&r"\cA".repeat(32)).is_ok());
    assert_eq!(
        weight(&r"\cA".repeat(1300)),
        Err(PatternError::TooManyControlEscapes {
            count: 1300,
            limit: MAX_CONTROL_ESCAPES
        })
    );
    for p in [r"(", r"a{2,1}", r"[z-a]"] {
        assert_eq!(weight(p), Err(PatternError::Invalid), "{p}");
    }
}

/// Weighing stops where the limit is passed, so a pattern of many heavy
/// classes costs the weigher no more than one at the limit.
#[test]
fn weighing_stops_at_the_limit() {
    let many = r"\p{L}".repeat(MAX_PATTERN_BYTES / 5);
    assert!(matches!(
        weigh(&many, 1_000),
        Err(PatternError::TooHeavy { limit: 1_000 })
    ));
    assert!(weigh(r"\p{L}", 1_000).is_err());
    assert!(weigh(r"\p{L}", u64::MAX).unwrap() > 1_000);
}

/// Case folding is done code point by code point when a class is parsed:
/// `(?i)\p{Any}` 583 times (a review's find) parsed in 2.3 s and compiled
/// in 4.6 s at a weight of 15,746. Any `i` flag is refused from the text,
/// before anything is parsed.
#[test]
fn case_insensitive_patterns_are_refused_unparsed() {
    let fold = format!("^(?=(?i){})", r"\p{Any}".repeat(583));
    assert!(fold.len() <= MAX_PATTERN_BYTES);
    for p in [
        fold.as_str(),
        r"(?i)a",
        r"x(?i:[a-z])",
        r"(?s-i)a",
        r"(?im)^a",
        r"[(?i)]",
    ] {
        assert_eq!(weight(p), Err(CASE_INSENSITIVE), "{p}");
    }
    for p in [r"(?<i>x)", r"(?:i)", r"\(?i\)", r"[i]i"] {
        assert!(weight(p).is_ok(), "{p}: {:?}", weight(p));
    }
}

/// ECMA's `.` is `[^\n\r\u2028\u2029]` once translated, weighed as such.
#[test]
fn the_dot_weighs_as_ecma_s() {
    assert!(ecma_dot_weight() > any_char_weight() - 10);
    assert!(weight(r"^.{100}a").unwrap() >= 100 * ecma_dot_weight());
}
