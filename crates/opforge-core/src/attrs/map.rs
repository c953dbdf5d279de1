//! [`AttrMap`]: a node's attrs, as a vector sorted by name.

use crate::proto::AttrValue;

/// A node's attrs by name, in name order.
///
/// A sorted vector rather than a `BTreeMap`: a node has a handful of attrs,
/// and a `BTreeMap` allocates a node of eleven slots (about 800 bytes) for
/// even one attr, which dominated the memory of large graphs (a chain of
/// 100,000 `Identity` nodes). Lookups are binary searches; the methods
/// mirror `BTreeMap`'s.
///
/// ```
/// use opforge_core::attrs::AttrMap;
/// use opforge_core::proto::AttrValue;
/// let mut m = AttrMap::new();
/// m.insert("b".to_string(), AttrValue::default());
/// m.insert("a".to_string(), AttrValue::default());
/// assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b"]);
/// assert!(m.contains_key("a") && m.get("c").is_none());
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct AttrMap {
    entries: Vec<(String, AttrValue)>,
}

impl std::fmt::Debug for AttrMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl AttrMap {
    /// An empty map.
    pub const fn new() -> AttrMap {
        AttrMap {
            entries: Vec::new(),
        }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// The value of `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut AttrValue> {
        match self.find(key) {
            Ok(i) => Some(&mut self.entries[i].1),
            Err(_) => None,
        }
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; the previous value, if any.
    pub fn insert(&mut self, key: String, value: AttrValue) -> Option<AttrValue> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`; its value, if it had one.
    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// The number of attrs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no attrs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The attrs in name order.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = (&String, &AttrValue)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The attrs in name order, values mutably.
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&String, &mut AttrValue)> + ExactSizeIterator {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &AttrValue> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Keeps only the attrs for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut AttrValue) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
    }

    /// Removes every attr.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

impl Extend<(String, AttrValue)> for AttrMap {
    fn extend<I: IntoIterator<Item = (String, AttrValue)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl FromIterator<(String, AttrValue)> for AttrMap {
    fn from_iter<I: IntoIterator<Item = (String, AttrValue)>>(iter: I) -> AttrMap {
        let mut entries: Vec<(String, AttrValue)> = iter.into_iter().collect();
        // Sorted, and the last value of a repeated key wins (as `BTreeMap`).
        entries.reverse();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, earlier| later.0 == earlier.0);
        entries.shrink_to_fit();
        AttrMap { entries }
    }
}

impl<const N: usize> From<[(String, AttrValue); N]> for AttrMap {
    fn from(entries: [(String, AttrValue); N]) -> AttrMap {
        entries.into_iter().collect()
    }
}

/// From a protobuf map (`NodeDef.attr`, `FunctionDef` attrs).
impl From<&std::collections::BTreeMap<String, AttrValue>> for AttrMap {
    fn from(map: &std::collections::BTreeMap<String, AttrValue>) -> AttrMap {
        AttrMap {
            // Already sorted and unique.
            entries: map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

/// To a protobuf map (`NodeDef.attr`).
impl From<AttrMap> for std::collections::BTreeMap<String, AttrValue> {
    fn from(map: AttrMap) -> Self {
        map.entries.into_iter().collect()
    }
}

impl IntoIterator for AttrMap {
    type Item = (String, AttrValue);
    type IntoIter = std::vec::IntoIter<(String, AttrValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a> IntoIterator for &'a AttrMap {
    type Item = (&'a String, &'a AttrValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, AttrValue)>,
        fn(&'a (String, AttrValue)) -> (&'a String, &'a AttrValue),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl std::ops::Index<&str> for AttrMap {
    type Output = AttrValue;
    fn index(&self, key: &str) -> &AttrValue {
        match self.get(key) {
            Some(v) => v,
            None => panic!("no attr named '{key}'"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::attr_value::Value;

    fn v(i: i64) -> AttrValue {
        AttrValue {
            value: Some(Value::I(i)),
        }
    }

    #[test]
    fn behaves_like_a_sorted_map() {
        let mut m = AttrMap::new();
        assert_eq!(m.insert("b".into(), v(1)), None);
        assert_eq!(m.insert("a".into(), v(2)), None);
        assert_eq!(m.insert("b".into(), v(3)), Some(v(1)));
        assert_eq!(
            m.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(m.get("b"), Some(&v(3)));
        assert_eq!(m.remove("a"), Some(v(2)));
        assert_eq!(m.len(), 1);
        let c: AttrMap = [
            ("z".to_string(), v(1)),
            ("y".to_string(), v(2)),
            ("z".to_string(), v(9)),
        ]
        .into_iter()
        .collect();
        assert_eq!(c.keys().collect::<Vec<_>>(), ["y", "z"]);
        assert_eq!(c["z"], v(9), "the last value of a repeated key wins");
        assert_eq!(format!("{:?}", AttrMap::new()), "{}");
    }
}
