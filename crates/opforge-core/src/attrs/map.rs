//! [`AttrMap`]: a node's attrs, as a vector sorted by name.

use crate::proto::AttrValue;
use std::sync::Arc;

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
///
/// A map can be [shared](AttrMap::share): its clones then share its
/// entries (a graph's node and the kernel built for it hold one copy of
/// the attrs), and changing a shared map first takes its own copy.
#[derive(Clone, Default)]
pub struct AttrMap {
    entries: Entries,
}

type Entry = (String, AttrValue);

#[derive(Clone)]
enum Entries {
    Owned(Vec<Entry>),
    Shared(Arc<[Entry]>),
}

impl Default for Entries {
    fn default() -> Self {
        Entries::Owned(Vec::new())
    }
}

impl PartialEq for AttrMap {
    fn eq(&self, other: &AttrMap) -> bool {
        self.slice() == other.slice()
    }
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
            entries: Entries::Owned(Vec::new()),
        }
    }

    /// Stores the entries so that clones of the map share them (one
    /// allocation, counted references) until one of them is changed.
    pub fn share(&mut self) {
        if let Entries::Owned(v) = &mut self.entries {
            self.entries = Entries::Shared(std::mem::take(v).into());
        }
    }

    fn slice(&self) -> &[Entry] {
        match &self.entries {
            Entries::Owned(v) => v,
            Entries::Shared(a) => a,
        }
    }

    /// The entries, to change: a shared map's are taken out (moved when
    /// no clone shares them, else copied).
    fn vec_mut(&mut self) -> &mut Vec<Entry> {
        if let Entries::Shared(a) = &mut self.entries {
            let v: Vec<Entry> = match Arc::get_mut(a) {
                Some(unique) => unique.iter_mut().map(std::mem::take).collect(),
                None => a.to_vec(),
            };
            self.entries = Entries::Owned(v);
        }
        match &mut self.entries {
            Entries::Owned(v) => v,
            Entries::Shared(_) => unreachable!("made owned above"),
        }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.slice().binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.find(key).ok().map(|i| &self.slice()[i].1)
    }

    /// The value of `key`, mutably.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut AttrValue> {
        match self.find(key) {
            Ok(i) => Some(&mut self.vec_mut()[i].1),
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
            Ok(i) => Some(std::mem::replace(&mut self.vec_mut()[i].1, value)),
            Err(i) => {
                self.vec_mut().insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`; its value, if it had one.
    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        self.find(key).ok().map(|i| self.vec_mut().remove(i).1)
    }

    /// The number of attrs.
    pub fn len(&self) -> usize {
        self.slice().len()
    }

    /// Whether there are no attrs.
    pub fn is_empty(&self) -> bool {
        self.slice().is_empty()
    }

    /// The attrs in name order.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = (&String, &AttrValue)> + ExactSizeIterator {
        self.slice().iter().map(|(k, v)| (k, v))
    }

    /// The attrs in name order, values mutably.
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&String, &mut AttrValue)> + ExactSizeIterator {
        self.vec_mut().iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The names, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.slice().iter().map(|(k, _)| k)
    }

    /// The values, in name order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &AttrValue> + ExactSizeIterator {
        self.slice().iter().map(|(_, v)| v)
    }

    /// Keeps only the attrs for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut AttrValue) -> bool) {
        self.vec_mut().retain_mut(|(k, v)| keep(k, v));
    }

    /// Removes every attr.
    pub fn clear(&mut self) {
        self.entries = Entries::default();
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
        AttrMap {
            entries: Entries::Owned(entries),
        }
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
            entries: Entries::Owned(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        }
    }
}

/// To a protobuf map (`NodeDef.attr`).
impl From<AttrMap> for std::collections::BTreeMap<String, AttrValue> {
    fn from(map: AttrMap) -> Self {
        map.into_iter().collect()
    }
}

impl IntoIterator for AttrMap {
    type Item = (String, AttrValue);
    type IntoIter = std::vec::IntoIter<(String, AttrValue)>;
    fn into_iter(mut self) -> Self::IntoIter {
        std::mem::take(self.vec_mut()).into_iter()
    }
}

impl<'a> IntoIterator for &'a AttrMap {
    type Item = (&'a String, &'a AttrValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, AttrValue)>,
        fn(&'a (String, AttrValue)) -> (&'a String, &'a AttrValue),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.slice().iter().map(|(k, v)| (k, v))
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
