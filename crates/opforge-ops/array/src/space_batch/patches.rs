//! The CPU kernel of `ExtractImagePatches`: TensorFlow's
//! (`image/extract_image_patches_op.cc`), for the number types it registers
//! (`TF_CALL_NUMBER_TYPES`: the real types and both complex types), its
//! checks of `ksizes`/`strides`/`rates` and its output sizes and padding
//! (`GetWindowedOutputSize`: SAME pads `max(0, (out - 1) * stride +
//! effective_ksize - in)`, the smaller half before).
//!
//! Output element `[b, y, x, (i * ksize_cols + j) * depth + c]` is input
//! `[b, y * stride_rows + i * rate_rows - pad_top, x * stride_cols + j *
//! rate_cols - pad_left, c]`, zero where that lies in the padding: rows of
//! `depth` elements moved by [`RowGather`].

use super::rows::RowGather;
use super::windowed_output_size;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::{ensure, register_kernel, Result, Status, TensorShape};
use opforge_ops_base::cpu::mover::move_to_output;
use opforge_ops_base::types::NUMERIC_KERNEL_TYPES;

/// The rows and columns of a 4-value attr (`[1, rows, cols, 1]`), checked
/// as TensorFlow's `ParseAttributeVec4` does.
fn space_attr(ctx: &OpKernelConstruction<'_>, name: &str) -> Result<(i64, i64)> {
    let v: Vec<i32> = ctx.get_attr(name)?;
    ensure!(
        v.len() >= 4,
        InvalidArgument,
        "ExtractImagePatches requires the {name} attribute to contain 4 values, but got: {}",
        v.len()
    );
    ensure!(
        v[0] == 1 && v[3] == 1,
        Unimplemented,
        "Only support {name} across space."
    );
    ensure!(
        v[1] >= 1 && v[2] >= 1,
        OutOfRange,
        "{name} is out of range."
    );
    Ok((i64::from(v[1]), i64::from(v[2])))
}

/// `ExtractImagePatches`.
struct ExtractImagePatchesOp {
    ksizes: (i64, i64),
    strides: (i64, i64),
    rates: (i64, i64),
    same: bool,
}

impl CreateKernel for ExtractImagePatchesOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let padding: String = ctx.get_attr("padding")?;
        ensure!(
            matches!(padding.as_str(), "SAME" | "VALID"),
            InvalidArgument,
            "Invalid padding: {padding}"
        );
        Ok(ExtractImagePatchesOp {
            ksizes: space_attr(ctx, "ksizes")?,
            strides: space_attr(ctx, "strides")?,
            rates: space_attr(ctx, "rates")?,
            same: padding == "SAME",
        })
    }
}

/// One spatial dim of a patch extraction: its input and output sizes, the
/// padding before, and the kernel size, stride and rate.
#[derive(Clone, Copy, Debug)]
struct Axis {
    input: i64,
    output: i64,
    pad_before: i64,
    ksize: i64,
    stride: i64,
    rate: i64,
}

impl Axis {
    fn new(input: i64, ksize: i64, stride: i64, rate: i64, same: bool) -> Result<Axis> {
        // ksize, rate <= 2^31 - 1: the effective size fits in i64.
        let effective = ksize + (ksize - 1) * (rate - 1);
        let padding = if same { "SAME" } else { "VALID" };
        let output = windowed_output_size(input, effective, stride, padding)?;
        let pad_before = if same {
            let covered = (output.max(1) - 1)
                .checked_mul(stride)
                .and_then(|v| v.checked_add(effective))
                .ok_or_else(|| {
                    Status::invalid_argument("ExtractImagePatches padding overflows int64")
                })?;
            (covered - input).max(0) / 2
        } else {
            0
        };
        Ok(Axis {
            input,
            output,
            pad_before,
            ksize,
            stride,
            rate,
        })
    }

    /// The input index of output index `o` and kernel offset `k`, if inside
    /// the input.
    #[inline]
    fn source(&self, o: i64, k: i64) -> Option<i64> {
        let p = o * self.stride + k * self.rate - self.pad_before;
        (0..self.input).contains(&p).then_some(p)
    }
}

impl OpKernel for ExtractImagePatchesOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        ensure!(
            input.rank() == 4,
            InvalidArgument,
            "input must be 4-dimensional{}",
            input.shape()
        );
        let [batch, in_rows, in_cols, depth] = [0, 1, 2, 3].map(|i| input.dims()[i]);
        let rows = Axis::new(
            in_rows,
            self.ksizes.0,
            self.strides.0,
            self.rates.0,
            self.same,
        )?;
        let cols = Axis::new(
            in_cols,
            self.ksizes.1,
            self.strides.1,
            self.rates.1,
            self.same,
        )?;
        let out_depth = (rows.ksize * cols.ksize)
            .checked_mul(depth)
            .ok_or_else(|| {
                Status::invalid_argument("ExtractImagePatches output depth overflows int64")
            })?;
        let shape = TensorShape::new(&[batch, rows.output, cols.output, out_depth])?;
        if shape.num_elements() == 0 {
            return move_to_output(ctx, 0, &[&input], shape, &RowGather::new(0, |_| None));
        }
        // Rows of `depth` elements over [batch, out_rows, out_cols, ksize_rows, ksize_cols].
        let (kr, kc) = (rows.ksize as usize, cols.ksize as usize);
        let (or, oc) = (rows.output as usize, cols.output as usize);
        let (h, w, d) = (in_rows as usize, in_cols as usize, depth as usize);
        let body = RowGather::new(d, move |r: usize| {
            let j = r % kc;
            let i = (r / kc) % kr;
            let x = (r / (kc * kr)) % oc;
            let y = (r / (kc * kr * oc)) % or;
            let b = r / (kc * kr * oc * or);
            let row = rows.source(y as i64, i as i64)? as usize;
            let col = cols.source(x as i64, j as i64)? as usize;
            Some(((b * h + row) * w + col) * d)
        });
        move_to_output(ctx, 0, &[&input], shape, &body)
    }
}

register_kernel!(
    KernelDefBuilder::new("ExtractImagePatches").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    ExtractImagePatchesOp
);
