//! Op state: the [`ResourceMgr`], which holds typed resources (variables,
//! tables, ...) in named containers, as TensorFlow's `ResourceMgr` does,
//! and the [`ResourceHandle`]s that name them (the values of `resource`
//! tensors; defined in the low-level `resource_handle` module, which the
//! tensor types use without depending on this one).

pub use crate::resource_handle::ResourceHandle;
use crate::{Result, Status};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// A resource held by a [`ResourceMgr`].
pub trait Resource: Any + Send + Sync {
    /// A short description, for debugging.
    fn debug_string(&self) -> String;
}

type Key = (TypeId, String);
type Container = HashMap<Key, Arc<dyn Any + Send + Sync>>;

/// Typed resources in named containers. Thread-safe; resources are shared
/// as `Arc<T>` and do their own locking.
///
/// ```
/// use opforge_core::resource::{Resource, ResourceMgr};
/// use std::sync::Mutex;
/// struct Counter(Mutex<i64>);
/// impl Resource for Counter { fn debug_string(&self) -> String { "Counter".into() } }
/// let rm = ResourceMgr::new();
/// let c = rm.lookup_or_create("", "steps", || Ok(Counter(Mutex::new(0)))).unwrap();
/// *c.0.lock().unwrap() += 1;
/// let again = rm.lookup::<Counter>("", "steps").unwrap();
/// assert_eq!(*again.0.lock().unwrap(), 1);
/// assert!(rm.lookup::<Counter>("", "nope").is_err());
/// ```
#[derive(Default)]
pub struct ResourceMgr {
    containers: RwLock<HashMap<String, Container>>,
}

impl ResourceMgr {
    /// An empty manager.
    pub fn new() -> ResourceMgr {
        ResourceMgr::default()
    }

    /// Adds a resource; `AlreadyExists` if one of that type and name is in the container.
    pub fn create<T: Resource>(&self, container: &str, name: &str, resource: T) -> Result<Arc<T>> {
        let mut containers = self.containers.write().unwrap_or_else(|p| p.into_inner());
        let c = containers.entry(container.to_string()).or_default();
        let key = (TypeId::of::<T>(), name.to_string());
        if c.contains_key(&key) {
            return Err(Status::already_exists(format!(
                "Resource {container}/{name}/{} already exists",
                std::any::type_name::<T>()
            )));
        }
        let arc = Arc::new(resource);
        c.insert(key, arc.clone());
        Ok(arc)
    }

    /// The resource of type `T` named `name` in `container`; `NotFound` if absent.
    pub fn lookup<T: Resource>(&self, container: &str, name: &str) -> Result<Arc<T>> {
        let containers = self.containers.read().unwrap_or_else(|p| p.into_inner());
        let found = containers
            .get(container)
            .and_then(|c| c.get(&(TypeId::of::<T>(), name.to_string())))
            .cloned();
        match found {
            Some(any) => any
                .downcast::<T>()
                .map_err(|_| Status::internal("resource stored under the wrong type")),
            None => Err(Status::not_found(format!(
                "Resource {container}/{name}/{} does not exist. It may not have been created yet, or it was deleted",
                std::any::type_name::<T>()
            ))),
        }
    }

    /// The resource, created by `create` if absent (atomically: concurrent
    /// callers get the same resource).
    pub fn lookup_or_create<T: Resource>(
        &self,
        container: &str,
        name: &str,
        create: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        if let Ok(r) = self.lookup::<T>(container, name) {
            return Ok(r);
        }
        let mut containers = self.containers.write().unwrap_or_else(|p| p.into_inner());
        let c = containers.entry(container.to_string()).or_default();
        let key = (TypeId::of::<T>(), name.to_string());
        if let Some(existing) = c.get(&key) {
            return existing
                .clone()
                .downcast::<T>()
                .map_err(|_| Status::internal("resource stored under the wrong type"));
        }
        let arc = Arc::new(create()?);
        c.insert(key, arc.clone());
        Ok(arc)
    }

    /// Removes a resource; `NotFound` if absent. Holders of its `Arc` keep it alive.
    pub fn delete<T: Resource>(&self, container: &str, name: &str) -> Result<()> {
        let mut containers = self.containers.write().unwrap_or_else(|p| p.into_inner());
        let removed = containers
            .get_mut(container)
            .and_then(|c| c.remove(&(TypeId::of::<T>(), name.to_string())));
        match removed {
            Some(_) => Ok(()),
            None => Err(Status::not_found(format!(
                "Resource {container}/{name}/{} does not exist",
                std::any::type_name::<T>()
            ))),
        }
    }

    /// Removes a whole container.
    pub fn cleanup(&self, container: &str) {
        self.containers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(container);
    }

    /// The number of resources held.
    pub fn len(&self) -> usize {
        self.containers
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(HashMap::len)
            .sum()
    }

    /// Whether no resource is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct A(usize);
    impl Resource for A {
        fn debug_string(&self) -> String {
            format!("A({})", self.0)
        }
    }
    struct B;
    impl Resource for B {
        fn debug_string(&self) -> String {
            "B".into()
        }
    }

    #[test]
    fn create_lookup_delete() {
        let rm = ResourceMgr::new();
        rm.create("c", "x", A(1)).unwrap();
        assert_eq!(
            rm.create("c", "x", A(2)).map(|_| ()).unwrap_err().code(),
            crate::Code::AlreadyExists
        );
        rm.create("c", "x", B).unwrap(); // same name, other type
        assert_eq!(rm.lookup::<A>("c", "x").unwrap().0, 1);
        assert_eq!(
            rm.lookup::<A>("other", "x").map(|_| ()).unwrap_err().code(),
            crate::Code::NotFound
        );
        rm.delete::<A>("c", "x").unwrap();
        assert!(rm.lookup::<A>("c", "x").is_err());
        assert!(rm.delete::<A>("c", "x").is_err());
        assert_eq!(rm.len(), 1);
        rm.cleanup("c");
        assert!(rm.is_empty());
    }

    #[test]
    fn lookup_or_create_creates_once_across_threads() {
        let rm = Arc::new(ResourceMgr::new());
        let made = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (rm, made) = (rm.clone(), made.clone());
                std::thread::spawn(move || {
                    rm.lookup_or_create("", "v", || {
                        made.fetch_add(1, Ordering::SeqCst);
                        Ok(A(7))
                    })
                    .unwrap()
                    .0
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), 7);
        }
        assert_eq!(made.load(Ordering::SeqCst), 1);
    }
}
