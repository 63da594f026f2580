//! Fields of a child's JSONL read one at a time. A value of an unexpected type (a token
//! count printed as a string, `null` where JavaScript had a NaN, a negative cost, a number
//! past any count) makes only that field unusable, never its line: a message's text and
//! tool calls are never lost to one odd field. What was wrong goes out as an
//! [`AgentEvent::OddField`], which the result's `warnings` say once per field.
//!
//! Every type here takes the field's JSON text as it is (serde_json's `RawValue`) and reads
//! it itself, so that even a number serde_json would refuse to convert (`1e999`) cannot
//! fail the line. They borrow from the line, so they are for `serde_json::from_str` only.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::events::{AgentEvent, JsonType, Problem};

/// A field's JSON text, when it was there.
#[derive(Debug, Default, Clone, Copy)]
struct Raw<'a>(Option<&'a RawValue>);

impl<'a> Raw<'a> {
    /// The text, unless the field was absent, or null and `null_is_absent`; what was
    /// wrong with a null otherwise.
    fn text(self, null_is_absent: bool, expected: JsonType) -> Result<Option<&'a str>, Problem> {
        let Some(raw) = self.0 else { return Ok(None) };
        let text = raw.get();
        if text == "null" {
            return if null_is_absent {
                Ok(None)
            } else {
                Err(Problem::WrongType {
                    found: JsonType::Null,
                    expected,
                })
            };
        }
        Ok(Some(text))
    }

    /// The text when it is a JSON value of type `expected` (see [`Raw::text`] for null);
    /// anything else is reported as `field`'s problem and gives nothing.
    fn typed(
        self,
        null_is_absent: bool,
        expected: JsonType,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<&'a str> {
        let text = match self.text(null_is_absent, expected) {
            Ok(text) => text?,
            Err(problem) => return report(field, problem, emit),
        };
        let found = JsonType::of(text);
        if found != expected {
            return report(field, Problem::WrongType { found, expected }, emit);
        }
        Some(text)
    }
}

fn raw<'de, D: Deserializer<'de>>(d: D) -> Result<Raw<'de>, D::Error> {
    <&'de RawValue>::deserialize(d).map(|r| Raw(Some(r)))
}

/// Reports `problem` as `field`'s, and gives nothing.
fn report<T>(
    field: &'static str,
    problem: Problem,
    emit: &mut dyn FnMut(AgentEvent<'_>),
) -> Option<T> {
    emit(AgentEvent::OddField { field, problem });
    None
}

/// A number's value: integers exactly, anything else (`1000.0`, `1e3`) through `f64`,
/// which makes a number too large for it infinite rather than an error.
enum Number {
    Whole(u64),
    Other(f64),
}

fn number(text: &str) -> Number {
    match text.parse::<u64>() {
        Ok(n) => Number::Whole(n),
        Err(_) => Number::Other(text.parse::<f64>().unwrap_or(f64::NAN)),
    }
}

/// A count (of tokens, turns, attempts): a non-negative integer, written `1000`,
/// `1000.0` or `1e3` (the same JSON number). A fraction is rounded; a count past
/// `u64::MAX` is counted as that.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Count<'a>(Raw<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Count<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        raw(d).map(Count)
    }
}

impl Count<'_> {
    /// The count; null is a problem (a usage number that is null was a NaN).
    pub(crate) fn read(
        self,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<u64> {
        self.value(false, field, emit)
    }

    /// The count; null is no count.
    pub(crate) fn read_nullable(
        self,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<u64> {
        self.value(true, field, emit)
    }

    fn value(
        self,
        null_is_absent: bool,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<u64> {
        let text = self
            .0
            .typed(null_is_absent, JsonType::Number, field, emit)?;
        match number(text) {
            Number::Whole(n) => Some(n),
            Number::Other(v) if v.is_nan() => report(field, Problem::NotFinite, emit),
            Number::Other(v) if v < 0.0 && v.round() != 0.0 => {
                report(field, Problem::NegativeCount(v), emit)
            }
            // Past u64, or past f64 itself (infinite): a count larger than any.
            Number::Other(v) if v.round() >= u64::MAX as f64 => {
                emit(AgentEvent::OddField {
                    field,
                    problem: Problem::TooLarge(v),
                });
                Some(u64::MAX)
            }
            Number::Other(v) => Some(v.round().max(0.0) as u64),
        }
    }
}

/// An amount of money (USD): a finite, non-negative number. A negative one is never a
/// credit.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Amount<'a>(Raw<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Amount<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        raw(d).map(Amount)
    }
}

impl Amount<'_> {
    /// The amount; null is a problem (what a NaN cost becomes in JSON).
    pub(crate) fn read(
        self,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<f64> {
        let text = self.0.typed(false, JsonType::Number, field, emit)?;
        let v = match number(text) {
            Number::Whole(n) => n as f64,
            Number::Other(v) => v,
        };
        if !v.is_finite() {
            report(field, Problem::NotFinite, emit)
        } else if v < 0.0 {
            report(field, Problem::NegativeAmount(v), emit)
        } else {
            // -0 is 0.
            Some(v.abs())
        }
    }
}

/// A string field (an id, a name, a role, a stop reason). Anything else is no string.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Str<'a>(Raw<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        raw(d).map(Str)
    }
}

impl<'a> Str<'a> {
    /// The string; null is no string.
    pub(crate) fn read(
        self,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<Cow<'a, str>> {
        let text = self.0.text(true, JsonType::String).ok()??;
        match serde_json::from_str::<Cow<'a, str>>(text) {
            Ok(s) => Some(s),
            Err(_) => report(
                field,
                Problem::WrongType {
                    found: JsonType::of(text),
                    expected: JsonType::String,
                },
                emit,
            ),
        }
    }

    /// Whether the field holds exactly `s`, said nothing about otherwise (a test of an
    /// event's kind, where another type is another kind).
    pub(crate) fn is(self, s: &str) -> bool {
        let Raw(raw) = self.0;
        raw.and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok())
            .is_some_and(|v| v == s)
    }
}

/// A boolean field; absent and null are false.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Flag<'a>(Raw<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for Flag<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        raw(d).map(Flag)
    }
}

impl Flag<'_> {
    pub(crate) fn read(self, field: &'static str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        match self.0.text(true, JsonType::Boolean) {
            Ok(Some("true")) => true,
            Ok(Some("false")) | Ok(None) | Err(_) => false,
            Ok(Some(text)) => {
                report::<()>(
                    field,
                    Problem::WrongType {
                        found: JsonType::of(text),
                        expected: JsonType::Boolean,
                    },
                    emit,
                );
                false
            }
        }
    }
}

/// An object field read as `T` on its own, so that an object of another shape loses that
/// field only. For small objects (usage, an error body): the text is read twice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Object<'a, T> {
    raw: Raw<'a>,
    _type: std::marker::PhantomData<T>,
}

impl<T> Default for Object<'_, T> {
    fn default() -> Self {
        Object {
            raw: Raw(None),
            _type: std::marker::PhantomData,
        }
    }
}

impl<'de: 'a, 'a, T> Deserialize<'de> for Object<'a, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        raw(d).map(|raw| Object {
            raw,
            _type: std::marker::PhantomData,
        })
    }
}

impl<'a, T: Deserialize<'a>> Object<'a, T> {
    /// The object; null is no object.
    pub(crate) fn read(
        self,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<T> {
        self.value(true, field, emit)
    }

    /// The object; null is a problem.
    pub(crate) fn read_not_null(
        self,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<T> {
        self.value(false, field, emit)
    }

    fn value(
        self,
        null_is_absent: bool,
        field: &'static str,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> Option<T> {
        let text = self
            .raw
            .typed(null_is_absent, JsonType::Object, field, emit)?;
        match serde_json::from_str(text) {
            Ok(v) => Some(v),
            Err(_) => report(field, Problem::Malformed, emit),
        }
    }
}

/// An array field whose elements are read as `T`; anything else (null, a string) is an
/// empty array.
#[derive(Debug)]
pub(crate) struct List<T>(pub Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ListVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ListVisitor<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<List<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element()? {
                    out.push(v);
                }
                Ok(List(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<List<T>, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(List::default())
            }
            fn visit_unit<E>(self) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_none<E>(self) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<List<T>, E> {
                Ok(List::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<List<T>, E> {
                Ok(List::default())
            }
        }
        d.deserialize_any(ListVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[derive(Deserialize)]
    struct Fields<'a> {
        #[serde(borrow, default)]
        n: Count<'a>,
        #[serde(borrow, default)]
        usd: Amount<'a>,
        #[serde(borrow, default)]
        s: Str<'a>,
        #[serde(borrow, default)]
        b: Flag<'a>,
    }

    /// The four fields as read, and the problems said.
    type Read = (
        Option<u64>,
        Option<f64>,
        Option<String>,
        bool,
        Vec<(&'static str, Problem)>,
    );

    fn read(json: &str) -> Read {
        let f: Fields<'_> = serde_json::from_str(json).expect("never fails on a field");
        let mut odd = Vec::new();
        let mut emit = |e: AgentEvent<'_>| {
            if let AgentEvent::OddField { field, problem } = e {
                odd.push((field, problem));
            }
        };
        let n = f.n.read("n", &mut emit);
        let usd = f.usd.read("usd", &mut emit);
        let s = f.s.read("s", &mut emit).map(|s| s.into_owned());
        let b = f.b.read("b", &mut emit);
        (n, usd, s, b, odd)
    }

    #[test]
    fn good_values_of_every_notation_are_read() {
        assert_eq!(
            read(r#"{"n":1000,"usd":0.5,"s":"a\"b","b":true}"#),
            (
                Some(1000),
                Some(0.5),
                Some("a\"b".to_string()),
                true,
                vec![]
            )
        );
        for n in ["1000.0", "1e3", "1E+3", "999.6", "1000.4"] {
            assert_eq!(read(&format!(r#"{{"n":{n}}}"#)).0, Some(1000), "{n}");
        }
        assert_eq!(read(r#"{"usd":-0.0}"#).1, Some(0.0));
        assert_eq!(read(r#"{"n":-0.2}"#).0, Some(0));
        assert_eq!(read("{}"), (None, None, None, false, vec![]));
        // Null is no string and no flag.
        assert_eq!(
            read(r#"{"s":null,"b":null}"#),
            (None, None, None, false, vec![])
        );
    }

    #[test]
    fn odd_values_are_each_their_own_problem() {
        let number = |found| Problem::WrongType {
            found,
            expected: JsonType::Number,
        };
        assert_eq!(
            read(r#"{"n":"1000","usd":null,"s":5,"b":"yes"}"#),
            (
                None,
                None,
                None,
                false,
                vec![
                    ("n", number(JsonType::String)),
                    ("usd", number(JsonType::Null)),
                    (
                        "s",
                        Problem::WrongType {
                            found: JsonType::Number,
                            expected: JsonType::String
                        }
                    ),
                    (
                        "b",
                        Problem::WrongType {
                            found: JsonType::String,
                            expected: JsonType::Boolean
                        }
                    ),
                ]
            )
        );
        assert_eq!(
            read(r#"{"n":-5,"usd":-100}"#).4,
            vec![
                ("n", Problem::NegativeCount(-5.0)),
                ("usd", Problem::NegativeAmount(-100.0))
            ]
        );
        assert_eq!(
            read(r#"{"n":[1],"usd":{"total":1}}"#).4,
            vec![
                ("n", number(JsonType::Array)),
                ("usd", number(JsonType::Object))
            ]
        );
    }

    #[test]
    fn numbers_past_every_range_are_counted_as_the_largest_or_refused() {
        let (n, usd, _, _, odd) = read(r#"{"n":18446744073709551616,"usd":1e999}"#);
        assert_eq!((n, usd), (Some(u64::MAX), None));
        assert_eq!(
            odd,
            vec![
                ("n", Problem::TooLarge(18446744073709551616.0)),
                ("usd", Problem::NotFinite)
            ]
        );
        assert_eq!(read(r#"{"n":1e999}"#).0, Some(u64::MAX));
        assert_eq!(
            read(r#"{"n":-1e999}"#).4,
            vec![("n", Problem::NegativeCount(f64::NEG_INFINITY))]
        );
        assert_eq!(read(r#"{"n":18446744073709551615}"#).0, Some(u64::MAX));
        assert_eq!(read(r#"{"usd":1e308}"#).1, Some(1e308));
        assert_eq!(
            Problem::TooLarge(18446744073709551616.0).to_string(),
            "18446744073709552000, past the largest count"
        );
    }

    #[test]
    fn an_object_of_another_type_or_shape_is_lost_alone() {
        #[derive(Deserialize, Debug, PartialEq)]
        struct U {
            a: u64,
        }
        #[derive(Deserialize)]
        struct Line<'a> {
            #[serde(borrow, default)]
            u: Object<'a, U>,
            #[serde(default)]
            l: List<u64>,
        }
        let mut odd = Vec::new();
        let mut emit = |e: AgentEvent<'_>| {
            if let AgentEvent::OddField { field, problem } = e {
                odd.push((field, problem));
            }
        };
        let mut get = |json: &str| {
            let line: Line<'_> = serde_json::from_str(json).unwrap();
            (line.u.read_not_null("u", &mut emit), line.l.0)
        };
        assert_eq!(
            get(r#"{"u":{"a":1},"l":[1,2]}"#),
            (Some(U { a: 1 }), vec![1, 2])
        );
        assert_eq!(get(r#"{"u":{"a":1,"a":2},"l":"x"}"#), (None, vec![]));
        assert_eq!(get(r#"{"u":null,"l":null}"#), (None, vec![]));
        assert_eq!(get(r#"{"u":[1],"l":{"a":[1]}}"#), (None, vec![]));
        assert_eq!(
            odd,
            vec![
                ("u", Problem::Malformed),
                (
                    "u",
                    Problem::WrongType {
                        found: JsonType::Null,
                        expected: JsonType::Object
                    }
                ),
                (
                    "u",
                    Problem::WrongType {
                        found: JsonType::Array,
                        expected: JsonType::Object
                    }
                ),
            ]
        );
    }
}
