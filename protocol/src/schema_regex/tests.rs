use super::*;

fn weight(p: &str) -> Result<u64, PatternError> {
    weigh(p, MAX_PATTERN_WEIGHT)
}

/// Patterns of the kind real schemas hold weigh little.
#[test]
fn real_patterns_are_light() {
    for p in [
        r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$",
        r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-.]+)?$",
        r"^\d{4}-\d{2}-\d{2}$",
        r"^(?=.*\d)(?=.*[a-z])\w{4,}$",
        r"^[a-zA-Z0-9_-]{1,64}$",
        r"^https?://",
    ] {
        let w = weight(p).unwrap();
        assert!(w < 20_000, "{p}: {w}");
    }
    // Unicode classes weigh by their UTF-8 sequences; a plausible one fits.
    let unicode = weight(r"^[\p{L}\p{N}_-]{1,64}$").unwrap();
    assert!(
        unicode > 10_000 && unicode < MAX_PATTERN_WEIGHT,
        "{unicode}"
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
    // The count is ECMA-262's: `\w` is 63 ASCII characters, four ranges.
    assert_eq!(weight(r"\w{100}").unwrap(), 401);
}

/// The hostile shape the engine's size limit missed: `^(?=A)(?=B)…Z` is
/// compiled part by part, each part a program of its own under the regex
/// crate's default limit. Its weight is the parts' in all.
#[test]
fn a_lookahead_chain_weighs_its_parts_in_all() {
    let part = r"(?=[\s\S]{2000})";
    let chain = format!("^{}x", part.repeat(12));
    let parts = jsonschema_regex::split_leading_lookaheads(&chain).expect("split");
    assert_eq!(parts.len(), 13, "compiled as 13 programs");
    let one = weight(&format!("^{part}x")).unwrap();
    assert!(one < MAX_PATTERN_WEIGHT / 4, "{one}");
    assert!(matches!(weight(&chain), Err(PatternError::TooHeavy { .. })));
}

#[test]
fn length_constructs_and_syntax_are_checked_first() {
    let long = "a".repeat(MAX_PATTERN_BYTES + 1);
    assert_eq!(
        weight(&long),
        Err(PatternError::TooLong {
            len: MAX_PATTERN_BYTES + 1,
            limit: MAX_PATTERN_BYTES
        })
    );
    // Lookarounds leave a pattern untranslated, so fancy-regex's own
    // syntax would reach its compiler: none of it is ECMA-262.
    for (p, construct) in [
        (r"^(?=a)(b)\g<1>", "a subroutine call"),
        (r"^(?=a)(?(DEFINE)(?<x>a))", "a group definition"),
        (r"^(?=a)(b)?(?(1)c|d)", "a conditional"),
        (r"^(?=a)b\Gc", "a backtracking control"),
        (r"^(?=a)(?~abc)", "a backtracking control"),
    ] {
        assert_eq!(
            weight(p),
            Err(PatternError::Unsupported { construct }),
            "{p}"
        );
    }
    // Each `\cX` costs the translation a pass over the whole pattern.
    assert_eq!(weight(&r"\cA".repeat(32)).unwrap(), 33);
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
    for p in [r"(?<i>x)\1", r"(?=i)", r"(?:i)", r"\(?i\)", r"(?!i)i"] {
        assert!(weight(p).is_ok(), "{p}: {:?}", weight(p));
    }
}

/// A part of a lookahead chain is translated on its own, and ECMA's `.`
/// (`[^\n\r\u2028\u2029]`) is heavier than fancy-regex's: weighed as
/// the part is compiled (a review's find: 243,005 for a part that took
/// ~70 ms to compile and then failed the engine's size limit).
#[test]
fn lookahead_parts_are_weighed_as_translated() {
    assert!(ecma_dot_weight() > any_char_weight() - 10);
    assert!(matches!(
        weight(r"^(?=.{9000})"),
        Err(PatternError::TooHeavy { .. })
    ));
    let light = weight(r"^(?=.{100})a").unwrap();
    assert!(light >= 100 * ecma_dot_weight(), "{light}");
}
