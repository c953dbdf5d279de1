//! Tests of the compatibility rules ([`check`] and the attr-default
//! checks).

use super::test_util::op;
use super::*;
use crate::dtype::DataType;
use crate::proto::{attr_value::Value, AttrValue, OpDef, TensorProto};
use crate::Tensor;

fn reasons(old: &OpDef, new: &OpDef) -> Vec<String> {
    match check(old, new) {
        Ok(()) => Vec::new(),
        Err(r) => r.into_iter().map(|r| r.message).collect(),
    }
}

/// Asserts `a -> b` is compatible and `b -> a` is not, with `reverse`
/// in the first reason of the reverse direction.
fn one_way(a: &OpDef, b: &OpDef, reverse: &str) {
    assert_eq!(reasons(a, b), Vec::<String>::new(), "forward");
    let back = reasons(b, a);
    assert!(
        back.first().is_some_and(|r| r.contains(reverse)),
        "reverse: {back:?}, want {reverse}"
    );
}

#[test]
fn identical_ops_are_compatible() {
    let a = op(
        "Same",
        &[
            "in a: int32",
            "in b: T",
            "in c: N * int32",
            "in d: N * T",
            "in e: TList",
            "out ndef: string",
            "attr T: type",
            "attr N: int",
            "attr TList: list(type)",
        ],
    );
    assert!(check(&a, &a).is_ok());
    assert!(attr_defaults_unchanged(&a, &a).is_ok());
    op_def_compatible(&a, &a).unwrap();
}

#[test]
fn attr_with_default_may_be_added_but_not_removed() {
    let a = op("A", &["out y: string"]);
    let b = op("A", &["out y: string", "attr a: int = 42"]);
    one_way(&a, &b, "Attr 'a' removed");
    assert_eq!(check(&b, &a).unwrap_err()[0].rule, Rule::AttrRemoved);
}

#[test]
fn attr_without_default_may_not_be_added() {
    let a = op("A", &[]);
    let b = op("A", &["attr a: int"]);
    assert_eq!(reasons(&a, &b), ["Attr 'a' added without default"]);
    // The reverse removes it.
    assert_eq!(reasons(&b, &a), ["Attr 'a' removed"]);
    assert_eq!(
        check(&a, &b).unwrap_err()[0].advice(),
        Rule::AttrAddedWithoutDefault.advice()
    );
    assert!(Rule::AttrAddedWithoutDefault.advice().contains("default"));
}

#[test]
fn renaming_an_attr_removes_one_and_adds_one() {
    let a = op("A", &["attr a: int"]);
    let b = op("A", &["attr b: int"]);
    assert_eq!(
        reasons(&a, &b),
        ["Attr 'a' removed", "Attr 'b' added without default"]
    );
}

#[test]
fn allowed_types_and_strings_may_widen_not_narrow() {
    let a = op("A", &["attr t: {int32, int64}"]);
    let b = op("A", &["attr t: {int32, int64, bool}"]);
    one_way(
        &a,
        &b,
        "Attr 't' has a stricter set of allowed values; from [DT_INT32, DT_INT64, DT_BOOL] to [DT_INT32, DT_INT64]",
    );
    let c = op("A", &["attr t: type"]);
    one_way(
        &a,
        &c,
        "Attr 't' has a stricter set of allowed values; from no restriction to [DT_INT32, DT_INT64]",
    );
    // Reordering the allowed types is fine both ways.
    let d = op("A", &["attr t: {int64, int32}"]);
    assert!(check(&a, &d).is_ok() && check(&d, &a).is_ok());

    let s = op("A", &["attr a: {'A', 'B'}"]);
    let t = op("A", &["attr a: {'A', 'B', 'C'}"]);
    one_way(&s, &t, "from [\"A\", \"B\", \"C\"] to [\"A\", \"B\"]");
    assert_eq!(
        check(&t, &s).unwrap_err()[0].rule,
        Rule::AttrAllowedValuesNarrowed
    );
}

#[test]
fn minimums_may_be_lowered_not_raised() {
    let a = op("A", &["attr n: int >= 3"]);
    let b = op("A", &["attr n: int >= 1"]);
    one_way(&a, &b, "Attr 'n' has a higher minimum; from 1 to 3");
    let c = op("A", &["attr n: int"]);
    one_way(
        &a,
        &c,
        "Attr 'n' has a higher minimum; from no minimum to 3",
    );
    // List lengths too.
    let l2 = op("A", &["in a: T", "attr T: list(type) >= 2"]);
    let l1 = op("A", &["in a: T", "attr T: list(type) >= 1"]);
    one_way(&l2, &l1, "has a higher minimum; from 1 to 2");
    assert_eq!(
        check(&l1, &l2).unwrap_err()[0].rule,
        Rule::AttrMinimumRaised
    );
}

#[test]
fn attr_types_may_not_change() {
    for (x, y) in [("bool", "int"), ("list(int)", "int"), ("int", "list(int)")] {
        let a = op("A", &[&format!("attr a: {x}")]);
        let b = op("A", &[&format!("attr a: {y}")]);
        assert_eq!(
            reasons(&a, &b),
            [format!("Attr 'a' changed type '{x}' -> '{y}'")]
        );
    }
    let a = op("A", &["in a: T", "attr T: type"]);
    let b = op("A", &["in a: T", "attr T: list(type)"]);
    assert_eq!(
        reasons(&a, &b),
        ["Attr 'T' changed type 'type' -> 'list(type)'"]
    );
    assert_eq!(
        reasons(&b, &a),
        ["Attr 'T' changed type 'list(type)' -> 'type'"]
    );
}

#[test]
fn a_fixed_type_may_become_a_type_attr_with_that_default() {
    let a = op("A", &["in a: int32", "out y: int32"]);
    let b = op("A", &["in a: T", "out y: T", "attr T: type = DT_INT32"]);
    one_way(&a, &b, "Attr 'T' removed");
    // With another default, old graphs would change type.
    let c = op("A", &["in a: T", "out y: T", "attr T: type = DT_FLOAT"]);
    assert_eq!(
        reasons(&a, &c),
        [
            "Input signature mismatch 'int32' vs. 'float'",
            "Output signature mismatch 'y:int32' vs. 'y:float'"
        ]
    );
}

#[test]
fn a_single_input_may_become_a_list_with_a_matching_default() {
    let single = op("A", &["in a: int32"]);
    let same = op("A", &["in a: N * int32", "attr N: int = 1"]);
    one_way(&single, &same, "Attr 'N' removed");
    let poly = op(
        "A",
        &["in a: N * T", "attr N: int = 1", "attr T: type = DT_INT32"],
    );
    one_way(&single, &poly, "Attr 'N' removed");
    let any = op("A", &["in a: T", "attr T: list(type) = [DT_INT32]"]);
    one_way(&single, &any, "Attr 'T' removed");
    // Two inputs may become one list of two.
    let two = op("A", &["in a: int32", "in b: float"]);
    let two_any = op(
        "A",
        &["in a: T", "attr T: list(type) = [DT_INT32, DT_FLOAT]"],
    );
    assert!(check(&two, &two_any).is_ok());
    let two_same = op("A", &["in a: int32", "in b: int32"]);
    let n2 = op("A", &["in a: N * int32", "attr N: int = 2"]);
    assert!(check(&two_same, &n2).is_ok());
    // A wrong default length is a signature change.
    let n3 = op("A", &["in a: N * int32", "attr N: int = 3"]);
    assert_eq!(
        reasons(&two_same, &n3),
        ["Input signature mismatch 'int32, int32' vs. 'int32, int32, int32'"]
    );
    // A polymorphic input may become N * T with N = 1.
    let t = op("A", &["in a: T", "attr T: type"]);
    let nt = op("A", &["in a: N * T", "attr N: int = 1", "attr T: type"]);
    assert!(check(&t, &nt).is_ok());
}

#[test]
fn a_new_list_input_must_default_to_empty() {
    let none = op("A", &["out y: string"]);
    let empty = op(
        "A",
        &["in a: N * int32", "out y: string", "attr N: int >= 0 = 0"],
    );
    one_way(&none, &empty, "Attr 'N' removed");
    assert_eq!(
        reasons(&empty, &none)[1],
        "Input signature mismatch 'N * int32' vs. ''"
    );
    let empty_any = op(
        "A",
        &["in a: T", "out y: string", "attr T: list(type) >= 0 = []"],
    );
    assert!(check(&none, &empty_any).is_ok());
    let big = op(
        "A",
        &["in a: N * int32", "out y: string", "attr N: int = 1"],
    );
    assert_eq!(
        reasons(&none, &big),
        ["Input signature mismatch '' vs. 'int32'"]
    );
    let big_any = op(
        "A",
        &[
            "in a: T",
            "out y: string",
            "attr T: list(type) = [DT_INT32]",
        ],
    );
    assert_eq!(
        reasons(&none, &big_any),
        ["Input signature mismatch '' vs. 'int32'"]
    );
    // A new list beside an existing polymorphic input, same T.
    let a = op("A", &["in a: T", "attr T: type"]);
    let b = op(
        "A",
        &[
            "in a: T",
            "in b: N * T",
            "attr N: int >= 0 = 0",
            "attr T: type",
        ],
    );
    one_way(&a, &b, "Attr 'N' removed");
}

#[test]
fn inputs_may_be_renamed_but_not_retyped_reordered_added_or_removed() {
    let x = op("A", &["in x: int32"]);
    let y = op("A", &["in y: int32"]);
    assert!(check(&x, &y).is_ok() && check(&y, &x).is_ok());
    let f = op("A", &["in x: float"]);
    assert_eq!(
        reasons(&x, &f),
        ["Input signature mismatch 'int32' vs. 'float'"]
    );
    let ba = op("A", &["in b: int32", "in a: float"]);
    let ab = op("A", &["in a: float", "in b: int32"]);
    assert_eq!(
        reasons(&ba, &ab),
        ["Input signature mismatch 'int32, float' vs. 'float, int32'"]
    );
    let none = op("A", &[]);
    assert_eq!(
        reasons(&f, &none),
        ["Input signature mismatch 'float' vs. ''"]
    );
    assert_eq!(
        reasons(&none, &f),
        ["Input signature mismatch '' vs. 'float'"]
    );
}

#[test]
fn outputs_may_not_be_renamed() {
    let old = op("A", &["out old: int32"]);
    let new = op("A", &["out new: int32"]);
    assert_eq!(
        reasons(&old, &new),
        ["Output signature mismatch 'old:int32' vs. 'new:int32'"]
    );
    let old = op("A", &["out old: N * int32", "attr N: int"]);
    let new = op("A", &["out new: N * int32", "attr N: int"]);
    assert_eq!(
        reasons(&old, &new),
        ["Output signature mismatch 'old:N * int32' vs. 'new:N * int32'"]
    );
    let old = op("A", &["out old: T", "attr T: list(type)"]);
    let new = op("A", &["out new: T", "attr T: list(type)"]);
    assert_eq!(
        reasons(&old, &new),
        ["Output signature mismatch 'old:T' vs. 'new:T'"]
    );
    assert_eq!(
        check(&old, &new).unwrap_err()[0].rule,
        Rule::OutputSignatureChanged
    );
}

#[test]
fn ref_inputs_may_become_plain_and_plain_outputs_ref() {
    let r = op("A", &["in i: Ref(int32)"]);
    let p = op("A", &["in i: int32"]);
    one_way(&r, &p, "Input 0 changed from non-ref to ref");
    assert_eq!(check(&p, &r).unwrap_err()[0].rule, Rule::InputBecameRef);
    let p = op("A", &["out o: int32", "out ndef: string"]);
    let r = op("A", &["out o: Ref(int32)", "out ndef: string"]);
    one_way(&p, &r, "Output 0 changed from ref to non-ref");
    assert_eq!(check(&r, &p).unwrap_err()[0].rule, Rule::OutputLostRef);
}

#[test]
fn statefulness_may_not_change() {
    let a = op("A", &["out y: int32"]);
    let mut b = a.clone();
    b.is_stateful = true;
    assert_eq!(reasons(&a, &b), ["is_stateful changed from false to true"]);
    assert_eq!(reasons(&b, &a), ["is_stateful changed from true to false"]);
    assert_eq!(
        check(&a, &b).unwrap_err()[0].rule,
        Rule::StatefulnessChanged
    );
    // Other flags may change.
    let mut c = a.clone();
    c.is_commutative = true;
    c.is_aggregate = true;
    assert!(check(&a, &c).is_ok() && check(&c, &a).is_ok());
}

#[test]
fn name_changes_are_reported() {
    let a = op("A", &[]);
    let b = op("B", &[]);
    assert_eq!(reasons(&a, &b), ["Name mismatch"]);
}

#[test]
fn every_reason_is_listed_and_the_first_is_tensorflows() {
    let old = op(
        "A",
        &[
            "in x: int32",
            "out y: int32",
            "attr a: int",
            "attr t: {int32, int64}",
            "attr n: int >= 1",
        ],
    );
    let new = op(
        "A",
        &[
            "in x: float",
            "out z: int32",
            "attr t: {int32}",
            "attr n: int >= 2",
            "attr b: bool",
        ],
    );
    assert_eq!(
        reasons(&old, &new),
        [
            "Attr 'a' removed",
            "Attr 't' has a stricter set of allowed values; from [DT_INT32, DT_INT64] to [DT_INT32]",
            "Attr 'n' has a higher minimum; from 1 to 2",
            "Attr 'b' added without default",
            "Input signature mismatch 'int32' vs. 'float'",
            "Output signature mismatch 'y:int32' vs. 'z:int32'",
        ]
    );
    let err = op_def_compatible(&old, &new).unwrap_err();
    assert_eq!(err.code(), crate::Code::InvalidArgument);
    assert!(
        err.message()
            .starts_with("Incompatible Op change: Attr 'a' removed; old: Op<name=A; "),
        "{err}"
    );
}

#[test]
fn signatures_on_a_new_attr_without_default_are_not_reported_twice() {
    let old = op("A", &["in x: int32"]);
    let new = op("A", &["in x: T", "attr T: type"]);
    assert_eq!(reasons(&old, &new), ["Attr 'T' added without default"]);
    let new = op("A", &["in x: N * int32", "attr N: int"]);
    assert_eq!(reasons(&old, &new), ["Attr 'N' added without default"]);
    let new = op("A", &["in x: T", "attr T: list(type)"]);
    assert_eq!(reasons(&old, &new), ["Attr 'T' added without default"]);
}

#[test]
fn huge_default_lengths_do_not_expand() {
    let old = op("A", &[]);
    let new = op("A", &["in x: N * int32", "attr N: int >= 0 = 1000000000"]);
    assert_eq!(
        reasons(&old, &new),
        ["Input signature mismatch '' vs. '1000000000 x int32'"]
    );
}

#[test]
fn defaults_may_be_added_but_not_removed_or_changed() {
    let none = op("A", &["attr a: int"]);
    let d2 = op("A", &["attr a: int = 2"]);
    let d1 = op("A", &["attr a: int = 1"]);
    // TensorFlow 2.21: adding a default is fine.
    assert!(attr_defaults_unchanged(&none, &d2).is_ok());
    let removed = attr_defaults_unchanged(&d2, &none).unwrap_err();
    assert_eq!(
        removed[0].message,
        "Attr 'a' has removed it's default; from 2 to no default"
    );
    assert_eq!(removed[0].rule, Rule::DefaultRemoved);
    assert!(removed[0].rule.is_default_change());
    let changed = attr_defaults_unchanged(&d2, &d1).unwrap_err();
    assert_eq!(
        changed[0].message,
        "Attr 'a' has changed it's default value; from 2 to 1"
    );
    assert_eq!(changed[0].rule, Rule::DefaultChanged);
    // None of this is an incompatibility.
    for (x, y) in [(&none, &d2), (&d2, &none), (&d2, &d1)] {
        assert!(check(x, y).is_ok());
    }
    // Shapes and strings.
    let s1 = op("A", &["attr shape: shape = {}"]);
    let s2 = op("A", &["attr shape: shape = { unknown_rank: true }"]);
    assert_eq!(
        attr_defaults_unchanged(&s1, &s2).unwrap_err()[0].message,
        "Attr 'shape' has changed it's default value; from [] to <unknown>"
    );
    let f = op("A", &["attr f: float = nan"]);
    assert!(attr_defaults_unchanged(&f, &f).is_ok());
}

#[test]
fn tensor_defaults_compare_by_content() {
    let a = op(
        "A",
        &["attr v: tensor = { dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: [1, 2] }"],
    );
    let mut b = a.clone();
    let t = Tensor::from_proto(&TensorProto {
        dtype: DataType::Int32 as i32,
        tensor_shape: Some(crate::TensorShape::new(&[2]).unwrap().to_proto()),
        int_val: vec![1, 2],
        ..Default::default()
    })
    .unwrap();
    b.attr[0].default_value = Some(AttrValue {
        value: Some(Value::Tensor(Box::new(t.to_proto().unwrap()))),
    });
    assert_ne!(a, b);
    assert!(attr_defaults_unchanged(&a, &b).is_ok());
    let c = op(
        "A",
        &["attr v: tensor = { dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: [1, 3] }"],
    );
    assert!(attr_defaults_unchanged(&a, &c).is_err());
}

#[test]
fn added_defaults_must_stay() {
    let v1 = op("A", &["in x: int32"]);
    let v2 = op("A", &["in x: int32", "attr k: int = 0"]);
    let v3 = op("A", &["in x: int32", "attr k: int = 1"]);
    assert!(added_defaults_unchanged(&v1, &v2, &v2).is_ok());
    let r = added_defaults_unchanged(&v1, &v2, &v3).unwrap_err();
    assert_eq!(
        r[0].message,
        format!(
            "Can't change default value for attr 'k' from 0 in op: {}",
            summarize_op_def(&v3)
        )
    );
    let no_default = op("A", &["in x: int32", "attr k: int"]);
    let r = added_defaults_unchanged(&v1, &v2, &no_default).unwrap_err();
    assert!(r[0]
        .message
        .starts_with("Missing default for attr 'k' in op: "));
    let r = added_defaults_unchanged(&v1, &v2, &v1).unwrap_err();
    assert!(r[0].message.starts_with("Missing attr 'k' in op: "));
}
