//! Unit tests of `Tensor` (construction, views, copies, shared and
//! read-only storage, printing).

use super::*;

#[test]
fn bytes_mut_writes_unshared_host_tensors_only() {
    let mut t = Tensor::from_vec(&[2], vec![1i32, 2]).unwrap();
    t.bytes_mut().unwrap()[..4].copy_from_slice(&7i32.to_ne_bytes());
    assert_eq!(t.flat::<i32>().unwrap(), &[7, 2]);
    let shared = t.clone();
    assert_eq!(
        t.bytes_mut().unwrap_err().code(),
        crate::Code::FailedPrecondition
    );
    drop(shared);
    assert_eq!(t.bytes_mut().unwrap().len(), 8);
    let mut s = Tensor::from_strings(&[1], vec![b"a".to_vec()]).unwrap();
    assert_eq!(
        s.bytes_mut().unwrap_err().code(),
        crate::Code::InvalidArgument
    );
}

#[test]
fn host_data_lends_what_bytes_and_bytes_mut_give() {
    let mut t = Tensor::from_vec(&[2], vec![1i32, 2]).unwrap();
    let b = t.bytes().unwrap().as_ptr();
    assert_eq!(t.host_data(), Some((b, 8)));
    let (p, len) = t.host_data_mut().expect("unshared");
    assert_eq!((p.cast_const(), len), (b, 8));
    // SAFETY: `t` is unshared and not otherwise accessed while `p`, its
    // 8 bytes (two i32s), is written.
    unsafe { p.cast::<i32>().write_unaligned(7) };
    assert_eq!(t.flat::<i32>().unwrap(), &[7, 2]);
    // A view of part of a buffer lends that part.
    let whole = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
    let row = whole.slice_outer(1, 2).unwrap();
    assert_eq!(row.host_data(), Some((row.bytes().unwrap().as_ptr(), 8)));
    // Shared: readable, not writable (as bytes_mut), until it is not.
    let shared = t.clone();
    assert!(t.host_data().is_some());
    assert_eq!(t.host_data_mut(), None);
    assert!(t.bytes_mut().is_err());
    drop(shared);
    assert!(t.host_data_mut().is_some());
    // No raw bytes: strings (and resources) are the slow path's.
    let mut s = Tensor::from_strings(&[1], vec![b"a".to_vec()]).unwrap();
    assert_eq!(s.host_data(), None);
    assert_eq!(s.host_data_mut(), None);
}

#[test]
fn read_only_foreign_memory_is_never_written() {
    use std::ptr::NonNull;
    use std::sync::atomic::{AtomicBool, Ordering};
    static RELEASED: AtomicBool = AtomicBool::new(false);
    let owner: Box<[f32; 4]> = Box::new([1.0, 2.0, 3.0, 4.0]);
    let ptr = NonNull::new(Box::into_raw(owner).cast::<u8>()).unwrap();
    let addr = ptr.as_ptr() as usize;
    let release = move || {
        // SAFETY: `addr` came from Box::into_raw of a [f32; 4], and the
        // buffer calls this once.
        drop(unsafe { Box::from_raw(addr as *mut [f32; 4]) });
        RELEASED.store(true, Ordering::SeqCst);
    };
    // SAFETY: `ptr` owns 16 initialized bytes (four f32s) until the
    // release callback turns it back into the Box and drops it.
    let buf = unsafe { Buffer::from_foreign_read_only(ptr, 16, Location::Host, release) };
    assert!(!buf.is_writable());
    let mut t = Tensor::from_buffer(DataType::Float, &[2, 2], buf).unwrap();
    assert_eq!(t.flat::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    assert!(!t.is_uniquely_owned(), "a kernel could forward it");
    let e = t.flat_mut::<f32>().unwrap_err();
    assert_eq!(e.code(), crate::Code::FailedPrecondition);
    assert!(e.message().contains("read-only"), "{e}");
    assert_eq!(
        t.bytes_mut().unwrap_err().code(),
        crate::Code::FailedPrecondition
    );
    assert!(t.host_data().is_some());
    assert_eq!(t.host_data_mut(), None, "lent read-only");
    // A copy is writable.
    let mut c = t.deep_copy().unwrap();
    c.flat_mut::<f32>().unwrap()[0] = 9.0;
    assert_eq!(t.flat::<f32>().unwrap()[0], 1.0);
    drop(t);
    assert!(RELEASED.load(Ordering::SeqCst));
}

#[test]
fn construct_and_view() {
    let t = Tensor::from_vec(&[2, 3], (0..6).map(|i| i as f64).collect()).unwrap();
    assert_eq!(t.num_elements(), 6);
    assert_eq!(t.flat::<f64>().unwrap()[5], 5.0);
    assert!(Tensor::from_vec(&[2, 2], vec![1i32]).is_err());
    assert_eq!(Tensor::scalar(3i64).scalar_value::<i64>().unwrap(), 3);
    assert!(t.scalar_value::<f64>().is_err());
    let z = Tensor::zeros(DataType::Bool, &[4]).unwrap();
    assert_eq!(z.flat::<bool>().unwrap(), &[false; 4]);
    let e = Tensor::zeros(DataType::Float, &[0, 3]).unwrap();
    assert_eq!(e.flat::<f32>().unwrap().len(), 0);
    assert!(Tensor::zeros(DataType::FloatRef, &[1]).is_err());
    assert!(Tensor::zeros(DataType::Variant, &[1]).is_err());
}

#[test]
fn sharing_blocks_writes_and_reshape_shares() {
    let mut t = Tensor::from_vec(&[4], vec![1i32, 2, 3, 4]).unwrap();
    assert!(t.is_uniquely_owned());
    let r = t.reshaped(&[2, 2]).unwrap();
    assert!(r.shares_storage_with(&t));
    assert!(!t.is_uniquely_owned());
    assert_eq!(
        t.flat_mut::<i32>().unwrap_err().code(),
        crate::Code::FailedPrecondition
    );
    drop(r);
    t.flat_mut::<i32>().unwrap()[0] = 9;
    assert!(t.reshaped(&[3]).is_err());
    let c = t.deep_copy().unwrap();
    assert!(!c.shares_storage_with(&t));
    assert_eq!(c, t);
}

#[test]
fn slice_outer_views() {
    let t = Tensor::from_vec(&[3, 2], vec![1u8, 2, 3, 4, 5, 6]).unwrap();
    let s = t.slice_outer(1, 3).unwrap();
    assert_eq!(s.dims(), &[2, 2]);
    assert_eq!(s.flat::<u8>().unwrap(), &[3, 4, 5, 6]);
    assert!(s.shares_storage_with(&t));
    assert!(t.slice_outer(2, 4).is_err());
    let strs = Tensor::from_strings(&[2], vec![b"a".to_vec(), b"b".to_vec()]).unwrap();
    assert_eq!(
        strs.slice_outer(1, 2).unwrap().strings().unwrap(),
        &[b"b".to_vec()]
    );
}

#[test]
fn strings_and_bitcast_and_summary() {
    let mut s = Tensor::from_strings(&[2], vec![b"x".to_vec(), b"yz".to_vec()]).unwrap();
    s.strings_mut().unwrap()[0] = b"w".to_vec();
    assert_eq!(
        s.summarize(10),
        "Tensor<type: string shape: [2] values: \"w\" \"yz\">"
    );
    let f = Tensor::from_vec(&[1], vec![1.0f32]).unwrap();
    let i = f.bitcast(DataType::Int32).unwrap();
    assert_eq!(i.flat::<i32>().unwrap()[0], 0x3f80_0000);
    assert!(f.bitcast(DataType::Bool).is_err());
    let big = Tensor::from_vec(&[20], vec![0i32; 20]).unwrap();
    assert!(big.summarize(3).ends_with("values: 0 0 0 ...>"));
}
