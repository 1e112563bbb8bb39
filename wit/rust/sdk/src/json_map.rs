//! A JSON object's string members, read without building a JSON tree: what
//! a view's `BTreeMap<String, String>` field (labels, a ConfigMap's `data`,
//! a selector) reads from the compact JSON text the host projects. A guest
//! that never parses JSON otherwise saves serde_json's parser this way (tens
//! of KiB of a component). Only reads; malformed text reads as `None`,
//! never a panic.

use std::collections::BTreeMap;

/// The string members of the JSON object `text` (other members skipped);
/// `None` when `text` is not a JSON object.
pub fn string_members(text: &str) -> Option<BTreeMap<String, String>> {
    let mut c = Cursor {
        s: text.as_bytes(),
        at: 0,
    };
    let mut out = BTreeMap::new();
    c.expect(b'{')?;
    if !c.eat(b'}') {
        loop {
            let key = c.string()?;
            c.expect(b':')?;
            if c.peek() == Some(b'"') {
                out.insert(key, c.string()?);
            } else {
                c.skip_value()?;
            }
            if c.eat(b'}') {
                break;
            }
            c.expect(b',')?;
        }
    }
    c.ws();
    (c.at == c.s.len()).then_some(out)
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        while matches!(self.s.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The next byte after white space.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let found = self.peek() == Some(b);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    /// A string, unescaped.
    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            let b = *self.s.get(self.at)?;
            self.at += 1;
            match b {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.s.get(self.at)?;
                    self.at += 1;
                    let c = match e {
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode()?,
                        b'"' | b'\\' | b'/' => char::from(e),
                        _ => return None,
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(b),
            }
        }
    }

    /// The character of a `\uXXXX` escape (after its `\u`), a surrogate
    /// pair's second half included.
    fn unicode(&mut self) -> Option<char> {
        let high = self.hex4()?;
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high);
        }
        if self.s.get(self.at..self.at + 2)? != b"\\u" {
            return None;
        }
        self.at += 2;
        let low = self.hex4()?;
        char::from_u32(0x10000 + ((high - 0xD800) << 10) + low.checked_sub(0xDC00)?)
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.s.get(self.at..self.at + 4)?).ok()?;
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// Skips one value of any kind.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.s.get(self.at)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    self.at += 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
            }
            _ => {
                let start = self.at;
                while !matches!(
                    self.s.get(self.at),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.at += 1;
                }
                (self.at > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn string_members_are_kept_and_other_values_skipped() {
        let text = r#"{"a":"1","n":2,"o":{"x":["}",{"y":"]"}]},"t":true,"e":"q\"\\\/\n\u00e9\ud83d\ude00","z":null}"#;
        let got = string_members(text).expect("an object");
        let want: Vec<(&str, &str)> = vec![("a", "1"), ("e", "q\"\\/\né😀")];
        assert_eq!(
            got.iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            want
        );
        assert_eq!(string_members(" { } ").map(|m| m.len()), Some(0));
        for bad in [
            "",
            "[]",
            "\"s\"",
            "{",
            "{\"a\"}",
            "{\"a\":\"1\",}",
            "{\"a\":\"1\"} x",
            "{\"a\":\"\\x\"}",
        ] {
            assert_eq!(string_members(bad), None, "{bad}");
        }
    }

    proptest! {
        /// Whatever serde_json writes for a map of strings (any text)
        /// reads back as that map.
        #[test]
        fn serde_json_s_text_of_a_string_map_reads_back(
            map in proptest::collection::btree_map(".*", ".*", 0..6)
        ) {
            let text = serde_json::to_string(&map).expect("serialisable");
            prop_assert_eq!(string_members(&text), Some(map));
        }
    }
}
