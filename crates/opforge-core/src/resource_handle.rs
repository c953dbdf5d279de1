//! [`ResourceHandle`]: the value of a `resource` tensor, naming a resource
//! held by a [`ResourceMgr`](crate::resource::ResourceMgr). Public as
//! `opforge_core::resource::ResourceHandle`.

use crate::dtype::DataType;
use crate::proto::{resource_handle_proto::DtypeAndShape, ResourceHandleProto, TensorShapeProto};

/// Names a resource: the device that holds it, its container and name, and
/// the type of the resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceHandle {
    /// The device that holds the resource.
    pub device: String,
    /// The container (a namespace of resources).
    pub container: String,
    /// The resource's name within its container.
    pub name: String,
    /// The Rust type name of the resource, for error messages.
    pub type_name: String,
    /// The dtypes and shapes of the values the resource holds (for variables).
    pub dtypes_and_shapes: Vec<(DataType, TensorShapeProto)>,
}

impl ResourceHandle {
    /// Reads a handle from its proto.
    pub fn from_proto(p: &ResourceHandleProto) -> ResourceHandle {
        ResourceHandle {
            device: p.device.clone(),
            container: p.container.clone(),
            name: p.name.clone(),
            type_name: p.maybe_type_name.clone(),
            dtypes_and_shapes: p
                .dtypes_and_shapes
                .iter()
                .map(|d| {
                    (
                        DataType::from_i32(d.dtype).unwrap_or(DataType::Invalid),
                        d.shape.clone().unwrap_or_default(),
                    )
                })
                .collect(),
        }
    }

    /// The handle as a proto.
    pub fn to_proto(&self) -> ResourceHandleProto {
        ResourceHandleProto {
            device: self.device.clone(),
            container: self.container.clone(),
            name: self.name.clone(),
            hash_code: 0,
            maybe_type_name: self.type_name.clone(),
            dtypes_and_shapes: self
                .dtypes_and_shapes
                .iter()
                .map(|(dt, shape)| DtypeAndShape {
                    dtype: *dt as i32,
                    shape: Some(shape.clone()),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_proto_round_trip() {
        let h = ResourceHandle {
            device: "/device:CPU:0".into(),
            container: "c".into(),
            name: "v".into(),
            type_name: "Var".into(),
            dtypes_and_shapes: vec![(DataType::Float, TensorShapeProto::default())],
        };
        assert_eq!(ResourceHandle::from_proto(&h.to_proto()), h);
    }
}
