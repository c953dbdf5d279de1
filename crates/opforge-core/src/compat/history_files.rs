//! The op-history folder: one file per op, `<OpName>.pbtxt`, an `OpList`
//! in protobuf text format holding every recorded version of the op, oldest
//! first, without docs (the layout of TensorFlow's `ops_history_v2`).
//! `opforge compat check|update` compare the registry with such a folder;
//! this module is the one reader and writer of the format, so the CLI, the
//! tests and the fuzz seeds read a history the same way.
//!
//! ```
//! use opforge_core::{compat, OpDefBuilder};
//! let dir = std::env::temp_dir().join(format!("opforge-history-doc-{}", std::process::id()));
//! let v1 = OpDefBuilder::new("ZeroOut").input("to_zero: int32").output("zeroed: int32")
//!     .doc("Zeros all but the first element.").finalize().unwrap();
//! compat::write_history_file(&dir, "ZeroOut", &[compat::strip_docs(&v1)]).unwrap();
//! let history = compat::read_history(&dir).unwrap();
//! assert_eq!(history["ZeroOut"], [compat::strip_docs(&v1)]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use crate::op_def::validate_op_def;
use crate::proto::{self, OpDef, OpList};
use crate::{Result, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The default op-history folder, relative to the current directory.
pub const DEFAULT_HISTORY_DIR: &str = "ops_history";

/// Every op's recorded versions, oldest first, by op name.
pub type History = BTreeMap<String, Vec<OpDef>>;

/// The file that holds op `name`'s history in `dir`.
pub fn history_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.pbtxt"))
}

/// The text of a history file holding `versions` (what
/// [`write_history_file`] writes; a committed file must read back as
/// exactly this text).
pub fn history_text(versions: &[OpDef]) -> String {
    proto::to_text(&OpList {
        op: versions.to_vec(),
    })
}

/// Reads one history file: a non-empty text-format `OpList` of valid
/// versions of one op, named after the file (`Foo.pbtxt` holds `Foo`).
/// Returns the op's name and its versions, oldest first.
pub fn read_history_file(path: &Path) -> Result<(String, Vec<OpDef>)> {
    let text = std::fs::read_to_string(path).map_err(|e| Status::io("read", path, &e))?;
    let list: OpList =
        proto::from_text(&text).map_err(|e| e.prepend(format!("{}: ", path.display())))?;
    let Some(first) = list.op.first() else {
        return Err(Status::invalid_argument(format!(
            "{}: holds no op version",
            path.display()
        )));
    };
    let name = first.name.clone();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if stem != name {
        return Err(Status::invalid_argument(format!(
            "{}: holds op '{name}', whose history belongs in {name}.pbtxt",
            path.display()
        )));
    }
    for (i, op) in list.op.iter().enumerate() {
        if op.name != name {
            return Err(Status::invalid_argument(format!(
                "{}: version {} is op '{}', not '{name}' (one file per op)",
                path.display(),
                i + 1,
                op.name
            )));
        }
        validate_op_def(op).map_err(|e| {
            e.prepend(format!(
                "{}: version {} is not a valid OpDef: ",
                path.display(),
                i + 1
            ))
        })?;
    }
    Ok((name, list.op))
}

/// The history files of `dir`, sorted: its `*.pbtxt` files (other files are
/// ignored). `NotFound`, with the advice to create the history, if the
/// folder does not exist.
pub fn history_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Status::not_found(format!(
                "there is no op history at '{}': run `opforge compat update` (with the same \
                 --history) to create it",
                dir.display()
            ))
        } else {
            Status::io("read", dir, &e)
        }
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| Status::io("read", dir, &e))?.path();
        if path.extension().is_some_and(|x| x == "pbtxt") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads an op-history folder: every history file of [`history_files`],
/// each checked by [`read_history_file`].
pub fn read_history(dir: &Path) -> Result<History> {
    let mut history = History::new();
    for path in history_files(dir)? {
        let (name, versions) = read_history_file(&path)?;
        history.insert(name, versions);
    }
    Ok(history)
}

/// Writes op `name`'s versions to its history file in `dir` (through a
/// temporary file, so a failed write leaves the old file).
pub fn write_history_file(dir: &Path, name: &str, versions: &[OpDef]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Status::io("create", dir, &e))?;
    let path = history_file(dir, name);
    let tmp = dir.join(format!(".{name}.pbtxt.tmp"));
    std::fs::write(&tmp, history_text(versions)).map_err(|e| Status::io("write", &tmp, &e))?;
    std::fs::rename(&tmp, &path).map_err(|e| Status::io("write", &path, &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "opforge-core-history-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn history_files_are_checked() {
        let dir = temp_dir("bad");
        let err = read_history(&dir).unwrap_err();
        assert_eq!(err.code(), Code::NotFound);
        assert!(err.message().contains("compat update"), "{err}");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("README.md"), "not a history file").unwrap();
        std::fs::write(dir.join("Foo.pbtxt"), "op { name: 'Bar' }").unwrap();
        let err = read_history(&dir).unwrap_err();
        assert!(err.message().contains("belongs in Bar.pbtxt"), "{err}");
        std::fs::write(
            dir.join("Foo.pbtxt"),
            "op { name: 'Foo' } op { name: 'Baz' }",
        )
        .unwrap();
        let err = read_history(&dir).unwrap_err();
        assert!(err.message().contains("version 2 is op 'Baz'"), "{err}");
        std::fs::write(dir.join("Foo.pbtxt"), "").unwrap();
        let err = read_history(&dir).unwrap_err();
        assert!(err.message().contains("holds no op version"), "{err}");
        std::fs::write(
            dir.join("Foo.pbtxt"),
            "op { name: 'Foo' input_arg { name: 'x' } }",
        )
        .unwrap();
        let err = read_history(&dir).unwrap_err();
        assert!(
            err.message().contains("version 1 is not a valid OpDef"),
            "{err}"
        );
        std::fs::write(dir.join("Foo.pbtxt"), "op { name: 'Foo' bogus: 1 }").unwrap();
        let err = read_history(&dir).unwrap_err();
        assert!(err.message().contains("Foo.pbtxt"), "{err}");
        std::fs::write(dir.join("Foo.pbtxt"), "op { name: 'Foo' }").unwrap();
        assert_eq!(read_history(&dir).unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn written_files_read_back_as_their_canonical_text() {
        let dir = temp_dir("write");
        let v1: OpDef =
            proto::from_text("name: 'Foo' input_arg { name: 'x' type: DT_FLOAT }").unwrap();
        let mut v2 = v1.clone();
        v2.is_stateful = true;
        write_history_file(&dir, "Foo", &[v1.clone(), v2.clone()]).unwrap();
        let path = history_file(&dir, "Foo");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            history_text(&[v1.clone(), v2.clone()])
        );
        assert_eq!(
            read_history_file(&path).unwrap(),
            ("Foo".to_string(), vec![v1, v2])
        );
        // No temporary file is left behind.
        assert_eq!(history_files(&dir).unwrap(), vec![path]);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
