//! Device names as TensorFlow writes them ([`DeviceSpec`]) and the set of
//! devices a runtime places nodes on ([`DeviceSet`]).

use super::{Device, DEVICE_CPU};
use crate::tensor::Location;
use crate::{Result, Status};
use std::sync::Arc;

/// A parsed device name: `/job:localhost/replica:0/task:0/device:CPU:0`,
/// `/device:GPU:1`, the legacy `/cpu:0`, `CPU:0`, or a partial one such as
/// `/device:CPU` (every part optional; an absent part matches anything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The job.
    pub job: Option<String>,
    /// The replica.
    pub replica: Option<u32>,
    /// The task.
    pub task: Option<u32>,
    /// The device type, upper case (`CPU`).
    pub device_type: Option<String>,
    /// The device's index within its type.
    pub id: Option<u32>,
}

impl DeviceSpec {
    /// Parses a device name as TensorFlow's `DeviceNameUtils::ParseFullName`
    /// (plus the short `CPU:0`); "" is the empty spec.
    ///
    /// ```
    /// use opforge_core::device::DeviceSpec;
    /// let s = DeviceSpec::parse("/job:localhost/replica:0/task:0/device:CPU:0").unwrap();
    /// assert_eq!((s.device_type.as_deref(), s.id), (Some("CPU"), Some(0)));
    /// let s = DeviceSpec::parse("/gpu:1").unwrap();
    /// assert_eq!((s.device_type.as_deref(), s.id), (Some("GPU"), Some(1)));
    /// assert!(DeviceSpec::parse("/device:CPU:x").is_err());
    /// ```
    pub fn parse(name: &str) -> Result<DeviceSpec> {
        let bad = || {
            Status::invalid_argument(format!(
                "Malformed device specification '{name}': expected a name like \
                 '/job:localhost/replica:0/task:0/device:CPU:0' or '/device:CPU:0'"
            ))
        };
        let number = |s: &str| -> Result<Option<u32>> {
            if s == "*" {
                Ok(None)
            } else {
                s.parse().map(Some).map_err(|_| bad())
            }
        };
        let mut spec = DeviceSpec::default();
        for piece in name.split('/').filter(|p| !p.is_empty()) {
            let (key, rest) = piece.split_once(':').unwrap_or((piece, ""));
            match key {
                "job" if !rest.is_empty() => spec.job = Some(rest.to_string()),
                "replica" => spec.replica = number(rest)?,
                "task" => spec.task = number(rest)?,
                "device" => {
                    let (ty, id) = rest.split_once(':').unwrap_or((rest, "*"));
                    if ty.is_empty() || !ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return Err(bad());
                    }
                    if ty != "*" {
                        spec.device_type = Some(ty.to_ascii_uppercase());
                    }
                    spec.id = number(id)?;
                }
                _ if piece == "*" => {}
                // Legacy `/cpu:0`, `/gpu:1`, and the short `CPU:0`.
                ty if !rest.is_empty()
                    && ty.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                {
                    spec.device_type = Some(ty.to_ascii_uppercase());
                    spec.id = number(rest)?;
                }
                _ => return Err(bad()),
            }
        }
        Ok(spec)
    }

    /// Whether `device` has every part this spec sets.
    pub fn matches(&self, device: &dyn Device) -> bool {
        let Ok(own) = DeviceSpec::parse(device.name()) else {
            return false;
        };
        let ty_ok = self
            .device_type
            .as_deref()
            .is_none_or(|t| t.eq_ignore_ascii_case(device.device_type()));
        let id_ok = self.id.is_none_or(|i| own.id.unwrap_or(0) == i);
        let job_ok = self.job.is_none() || own.job.is_none() || self.job == own.job;
        let replica_ok =
            self.replica.is_none() || own.replica.is_none() || self.replica == own.replica;
        let task_ok = self.task.is_none() || own.task.is_none() || self.task == own.task;
        ty_ok && id_ok && job_ok && replica_ok && task_ok
    }
}

/// The devices a runtime may place nodes on, in order of preference: the
/// first is the default device.
#[derive(Clone)]
pub struct DeviceSet {
    devices: Vec<Arc<dyn Device>>,
}

impl std::fmt::Debug for DeviceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.devices.iter().map(|d| d.name()))
            .finish()
    }
}

impl DeviceSet {
    /// A set of `devices` (at least one; names distinct).
    pub fn new(devices: Vec<Arc<dyn Device>>) -> Result<DeviceSet> {
        if devices.is_empty() {
            return Err(Status::invalid_argument(
                "a device set needs at least one device",
            ));
        }
        for (i, d) in devices.iter().enumerate() {
            if devices[..i].iter().any(|e| e.name() == d.name()) {
                return Err(Status::invalid_argument(format!(
                    "device '{}' is given twice",
                    d.name()
                )));
            }
        }
        Ok(DeviceSet { devices })
    }

    /// A set of one device.
    pub fn single(device: Arc<dyn Device>) -> DeviceSet {
        DeviceSet {
            devices: vec![device],
        }
    }

    /// The default (first) device.
    pub fn default_device(&self) -> &Arc<dyn Device> {
        &self.devices[0]
    }

    /// Every device, in order of preference.
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }

    /// The devices that match `spec`, in order of preference.
    pub fn matching(&self, spec: &DeviceSpec) -> Vec<&Arc<dyn Device>> {
        self.devices
            .iter()
            .filter(|d| spec.matches(d.as_ref()))
            .collect()
    }

    /// The device whose memory is `location` (`None` for the host when the
    /// set has no CPU device).
    pub fn by_location(&self, location: Location) -> Option<&Arc<dyn Device>> {
        match location {
            Location::Host => self.devices.iter().find(|d| d.device_type() == DEVICE_CPU),
            _ => self.devices.iter().find(|d| d.location() == location),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::CpuDevice;

    #[test]
    fn parses_tensorflow_device_names() {
        let full = DeviceSpec::parse("/job:localhost/replica:0/task:0/device:CPU:0").unwrap();
        assert_eq!(full.job.as_deref(), Some("localhost"));
        assert_eq!(
            (full.replica, full.task, full.id),
            (Some(0), Some(0), Some(0))
        );
        assert_eq!(DeviceSpec::parse("").unwrap(), DeviceSpec::default());
        let s = DeviceSpec::parse("/device:FAKE:*").unwrap();
        assert_eq!((s.device_type.as_deref(), s.id), (Some("FAKE"), None));
        let s = DeviceSpec::parse("CPU:0").unwrap();
        assert_eq!((s.device_type.as_deref(), s.id), (Some("CPU"), Some(0)));
        for bad in ["/device:CPU:x", "/replica:a", "/dev!ce", "/device::0"] {
            let e = DeviceSpec::parse(bad).unwrap_err();
            assert!(
                e.message().contains("Malformed device specification"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn matching_and_sets() {
        let cpu: Arc<dyn Device> = Arc::new(CpuDevice::new(1).unwrap());
        for (spec, ok) in [
            ("", true),
            ("/cpu:0", true),
            ("/device:CPU:0", true),
            ("/device:CPU:1", false),
            ("/device:GPU:0", false),
            ("/job:localhost/device:CPU:0", true),
            ("/job:worker/device:CPU:0", false),
        ] {
            assert_eq!(
                DeviceSpec::parse(spec).unwrap().matches(cpu.as_ref()),
                ok,
                "{spec}"
            );
        }
        let set = DeviceSet::new(vec![cpu.clone()]).unwrap();
        assert!(Arc::ptr_eq(set.default_device(), &cpu));
        assert_eq!(set.matching(&DeviceSpec::parse("/cpu:0").unwrap()).len(), 1);
        assert!(set.by_location(Location::Host).is_some());
        assert!(DeviceSet::new(vec![cpu.clone(), cpu]).is_err());
        assert!(DeviceSet::new(vec![]).is_err());
    }
}
