//! Adding (or replacing) one non-allocated section of an ELF file, for
//! `opforge lib seal`: the section's bytes, a copy of the section-name
//! string table (`.shstrtab`) that names it, and a new section header table
//! are appended at the end of the file, and the ELF header points at the new
//! table. Nothing the dynamic linker reads changes: the program headers,
//! every segment's bytes and every existing section's bytes stay where they
//! are, and no existing section index changes (the new section is appended
//! last; a section of that name that is already there is reused in place).
//!
//! ELF32 and ELF64, little- and big-endian. Files with extended section
//! numbering (65,280 sections or more) are refused as `Unimplemented`.

use opforge_core::{Result, Status};

const SHT_STRTAB: u32 = 3;
const SHT_NOBITS: u32 = 8;
/// `SHT_PROGBITS`: the type of the section written.
const SHT_PROGBITS: u32 = 1;
/// The first reserved section index: at or above it, ELF uses extended numbering.
const SHN_LORESERVE: u64 = 0xff00;

/// The class and byte order of an ELF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Form {
    is64: bool,
    big: bool,
}

impl Form {
    fn word(&self, b: &[u8], at: usize, size: usize) -> Option<u64> {
        let s = b.get(at..at.checked_add(size)?)?;
        let mut v = 0u64;
        if self.big {
            for &x in s {
                v = (v << 8) | u64::from(x);
            }
        } else {
            for &x in s.iter().rev() {
                v = (v << 8) | u64::from(x);
            }
        }
        Some(v)
    }

    fn put(&self, b: &mut [u8], at: usize, size: usize, v: u64) {
        for i in 0..size {
            let byte = (v >> (8 * i)) as u8;
            let pos = if self.big { at + size - 1 - i } else { at + i };
            b[pos] = byte;
        }
    }

    /// Bytes of an address/offset field.
    fn addr(&self) -> usize {
        if self.is64 {
            8
        } else {
            4
        }
    }

    /// Bytes of a section header.
    fn shentsize(&self) -> usize {
        if self.is64 {
            64
        } else {
            40
        }
    }
}

/// One section header, widened to 64 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Shdr {
    name: u32,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    addralign: u64,
    entsize: u64,
}

impl Shdr {
    fn read(f: Form, b: &[u8], at: usize) -> Option<Shdr> {
        let a = f.addr();
        // ELF64: name 0, type 4, flags 8, addr 16, offset 24, size 32, link 40,
        // info 44, addralign 48, entsize 56. ELF32: every field 4 bytes, in
        // the same order.
        let mut pos = at;
        let mut next = |size: usize| {
            let v = f.word(b, pos, size);
            pos += size;
            v
        };
        Some(Shdr {
            name: next(4)? as u32,
            kind: next(4)? as u32,
            flags: next(a)?,
            addr: next(a)?,
            offset: next(a)?,
            size: next(a)?,
            link: next(4)? as u32,
            info: next(4)? as u32,
            addralign: next(a)?,
            entsize: next(a)?,
        })
    }

    fn write(&self, f: Form, out: &mut Vec<u8>) {
        let a = f.addr();
        let mut field = |size: usize, v: u64| {
            let at = out.len();
            out.resize(at + size, 0);
            f.put(out, at, size, v);
        };
        field(4, u64::from(self.name));
        field(4, u64::from(self.kind));
        field(a, self.flags);
        field(a, self.addr);
        field(a, self.offset);
        field(a, self.size);
        field(4, u64::from(self.link));
        field(4, u64::from(self.info));
        field(a, self.addralign);
        field(a, self.entsize);
    }

    fn end(&self) -> u64 {
        if self.kind == SHT_NOBITS {
            0
        } else {
            self.offset.saturating_add(self.size)
        }
    }
}

fn align8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

fn damaged(what: &str) -> Status {
    Status::data_loss(format!("the ELF file is damaged: {what}"))
}

/// The name of section `s` in the string table `strtab`.
fn name_at<'a>(strtab: &'a [u8], s: &Shdr) -> Option<&'a [u8]> {
    let rest = strtab.get(s.name as usize..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some(&rest[..end])
}

/// The offset of `name` as a whole NUL-terminated string of `strtab`.
fn find_name(strtab: &[u8], name: &[u8]) -> Option<usize> {
    let mut start = 0;
    for (i, &c) in strtab.iter().enumerate() {
        if c == 0 {
            if &strtab[start..i] == name {
                return Some(start);
            }
            start = i + 1;
        }
    }
    None
}

type Parsed = (Form, Vec<Shdr>, Vec<u8>);

/// The form, section headers and section-name table of an ELF file.
fn parse(bytes: &[u8]) -> Result<Parsed> {
    if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(Status::invalid_argument("not an ELF file"));
    }
    let is64 = match bytes.get(4) {
        Some(1) => false,
        Some(2) => true,
        other => {
            return Err(Status::unimplemented(format!(
                "ELF class {other:?} (neither ELFCLASS32 nor ELFCLASS64) is not supported"
            )))
        }
    };
    let big = match bytes.get(5) {
        Some(1) => false,
        Some(2) => true,
        other => {
            return Err(Status::unimplemented(format!(
                "ELF data encoding {other:?} (neither little- nor big-endian) is not supported"
            )))
        }
    };
    let f = Form { is64, big };
    let a = f.addr();
    // e_shoff follows e_ident (16), e_type, e_machine (2 each), e_version
    // (4), e_entry and e_phoff (an address each).
    let shoff_at = 24 + 2 * a;
    // After e_shoff: e_flags (4), e_ehsize, e_phentsize, e_phnum (2 each),
    // then e_shentsize, e_shnum, e_shstrndx.
    let shentsize_at = shoff_at + a + 4 + 6;
    let header = |at: usize, size: usize| {
        f.word(bytes, at, size)
            .ok_or_else(|| damaged("the ELF header is cut short"))
    };
    let shoff = header(shoff_at, a)?;
    let shentsize = header(shentsize_at, 2)? as usize;
    let shnum = header(shentsize_at + 2, 2)?;
    let shstrndx = header(shentsize_at + 4, 2)?;
    if shoff == 0 {
        return Err(Status::failed_precondition(
            "the ELF file has no section header table",
        ));
    }
    if shnum == 0 || shstrndx >= SHN_LORESERVE {
        return Err(Status::unimplemented(
            "ELF files with extended section numbering (65,280 sections or more) are not \
             supported",
        ));
    }
    if shentsize != f.shentsize() {
        return Err(damaged(&format!(
            "e_shentsize is {shentsize}, expected {}",
            f.shentsize()
        )));
    }
    let mut shdrs = Vec::new();
    for i in 0..shnum as usize {
        let at = usize::try_from(shoff)
            .ok()
            .and_then(|o| o.checked_add(i * shentsize))
            .ok_or_else(|| damaged("the section header table lies outside the file"))?;
        shdrs.push(
            Shdr::read(f, bytes, at)
                .ok_or_else(|| damaged("the section header table lies outside the file"))?,
        );
    }
    let st = shdrs
        .get(shstrndx as usize)
        .ok_or_else(|| damaged("e_shstrndx names no section"))?;
    if st.kind != SHT_STRTAB {
        return Err(damaged("the section-name table is not a string table"));
    }
    let strtab = usize::try_from(st.offset)
        .ok()
        .zip(usize::try_from(st.size).ok())
        .and_then(|(o, s)| bytes.get(o..o.checked_add(s)?))
        .ok_or_else(|| damaged("the section-name table lies outside the file"))?
        .to_vec();
    Ok((f, shdrs, strtab))
}

/// The file `bytes` with a non-allocated `SHT_PROGBITS` section `name`
/// (aligned to 8) holding `data`. A section of that name already there is
/// replaced; if it lies after every other section (as this function writes
/// it), the bytes it and the tables after it took are reused, so replacing
/// the same content gives the same file.
pub(crate) fn set_section(bytes: &[u8], name: &str, data: &[u8]) -> Result<Vec<u8>> {
    let (f, mut shdrs, strtab) = parse(bytes)?;
    let a = f.addr();
    let shstrndx = {
        let at = 24 + 3 * a + 4 + 6 + 4;
        f.word(bytes, at, 2)
            .ok_or_else(|| damaged("the ELF header is cut short"))? as usize
    };
    let matches: Vec<usize> = (0..shdrs.len())
        .filter(|&i| name_at(&strtab, &shdrs[i]) == Some(name.as_bytes()))
        .collect();
    if matches.len() > 1 {
        return Err(damaged(&format!(
            "it has {} sections named {name}",
            matches.len()
        )));
    }
    let existing = matches.first().copied();
    // Where the appended part starts: after everything the file keeps.
    let mut base = bytes.len();
    if let Some(i) = existing {
        // e_phoff, e_phentsize, e_phnum: the program header table's end.
        let phoff = f.word(bytes, 24 + a, a).unwrap_or(0);
        let phentsize = f.word(bytes, 24 + 3 * a + 4 + 2, 2).unwrap_or(0);
        let phnum = f.word(bytes, 24 + 3 * a + 4 + 4, 2).unwrap_or(0);
        let mut keep = phoff.saturating_add(phentsize.saturating_mul(phnum));
        keep = keep.max(if f.is64 { 64 } else { 52 });
        for (j, s) in shdrs.iter().enumerate() {
            if j != i && j != shstrndx {
                keep = keep.max(s.end());
            }
        }
        let old = shdrs[i].offset;
        if old >= keep && old <= bytes.len() as u64 {
            base = old as usize;
        }
    }
    let mut out = bytes[..base].to_vec();
    out.resize(align8(base), 0);
    let data_off = out.len();
    out.extend_from_slice(data);
    // The section-name table: the old one, plus the name if it lacks it.
    let mut names = strtab;
    let name_off = match find_name(&names, name.as_bytes()) {
        Some(o) => o,
        None => {
            if names.last().is_some_and(|&c| c != 0) {
                names.push(0);
            }
            let o = names.len();
            names.extend_from_slice(name.as_bytes());
            names.push(0);
            o
        }
    };
    let names_off = out.len();
    out.extend_from_slice(&names);
    out.resize(align8(out.len()), 0);
    let shoff = out.len();
    let section = Shdr {
        name: u32::try_from(name_off).map_err(|_| damaged("the section-name table is too big"))?,
        kind: SHT_PROGBITS,
        flags: 0,
        addr: 0,
        offset: data_off as u64,
        size: data.len() as u64,
        link: 0,
        info: 0,
        addralign: 8,
        entsize: 0,
    };
    match existing {
        Some(i) => shdrs[i] = section,
        None => shdrs.push(section),
    }
    shdrs[shstrndx].offset = names_off as u64;
    shdrs[shstrndx].size = names.len() as u64;
    if shdrs.len() as u64 >= SHN_LORESERVE {
        return Err(Status::unimplemented(
            "adding a section would need extended section numbering (65,280 sections or \
             more), which is not supported",
        ));
    }
    if !f.is64 && out.len() as u64 + (shdrs.len() * f.shentsize()) as u64 > u64::from(u32::MAX) {
        return Err(Status::unimplemented(
            "the sealed ELF32 file would be larger than 4 GiB",
        ));
    }
    for s in &shdrs {
        s.write(f, &mut out);
    }
    let shoff_at = 24 + 2 * a;
    f.put(&mut out, shoff_at, a, shoff as u64);
    f.put(&mut out, shoff_at + a + 4 + 6 + 2, 2, shdrs.len() as u64);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection};

    /// A minimal relocatable-style ELF file with a null section, a PROGBITS
    /// section `payload` and `.shstrtab`.
    fn tiny_elf(is64: bool, big: bool) -> Vec<u8> {
        let f = Form { is64, big };
        let ehsize = if is64 { 64 } else { 52 };
        let mut b = vec![0u8; ehsize];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = if is64 { 2 } else { 1 };
        b[5] = if big { 2 } else { 1 };
        b[6] = 1; // EV_CURRENT
        f.put(&mut b, 16, 2, 3); // ET_DYN
        f.put(&mut b, 18, 2, if is64 { 62 } else { 3 }); // x86-64 / i386
        f.put(&mut b, 20, 4, 1);
        let a = f.addr();
        f.put(&mut b, 24 + 3 * a + 4, 2, ehsize as u64); // e_ehsize
        let payload_off = b.len();
        b.extend_from_slice(b"payload!");
        let names = b"\0payload\0.shstrtab\0";
        let names_off = b.len();
        b.extend_from_slice(names);
        b.resize(align8(b.len()), 0);
        let shoff = b.len();
        let shdrs = [
            Shdr::default(),
            Shdr {
                name: 1,
                kind: SHT_PROGBITS,
                offset: payload_off as u64,
                size: 8,
                addralign: 1,
                ..Shdr::default()
            },
            Shdr {
                name: 9,
                kind: SHT_STRTAB,
                offset: names_off as u64,
                size: names.len() as u64,
                addralign: 1,
                ..Shdr::default()
            },
        ];
        for s in &shdrs {
            s.write(f, &mut b);
        }
        f.put(&mut b, 24 + 2 * a, a, shoff as u64);
        f.put(&mut b, 24 + 3 * a + 4 + 6, 2, f.shentsize() as u64);
        f.put(&mut b, 24 + 3 * a + 4 + 8, 2, 3);
        f.put(&mut b, 24 + 3 * a + 4 + 10, 2, 2);
        b
    }

    fn section<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
        let file = object::File::parse(bytes).unwrap();
        let s = file.section_by_name(name)?;
        s.data().ok()
    }

    #[test]
    fn adds_and_replaces_a_section_in_every_class_and_byte_order() {
        for is64 in [false, true] {
            for big in [false, true] {
                let orig = tiny_elf(is64, big);
                assert_eq!(section(&orig, "payload"), Some(b"payload!".as_slice()));
                let once = set_section(&orig, "sealed", b"first data").unwrap();
                assert_eq!(section(&once, "sealed"), Some(b"first data".as_slice()));
                assert_eq!(section(&once, "payload"), Some(b"payload!".as_slice()));
                let ehsize = if is64 { 64 } else { 52 };
                assert_eq!(&once[ehsize..orig.len()], &orig[ehsize..], "nothing moves");
                let twice = set_section(&once, "sealed", b"second, longer data").unwrap();
                assert_eq!(
                    section(&twice, "sealed"),
                    Some(b"second, longer data".as_slice())
                );
                let file = object::File::parse(&*twice).unwrap();
                assert_eq!(
                    file.sections().count(),
                    3,
                    "is64 {is64} big {big}: payload, .shstrtab, sealed"
                );
                let again = set_section(&twice, "sealed", b"first data").unwrap();
                assert_eq!(again, once, "replacing gives the same bytes");
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_edit() {
        assert_eq!(
            set_section(b"MZ not elf", "x", b"").unwrap_err().code(),
            opforge_core::Code::InvalidArgument
        );
        let mut e = tiny_elf(true, false);
        e[4] = 7;
        assert_eq!(
            set_section(&e, "x", b"").unwrap_err().code(),
            opforge_core::Code::Unimplemented
        );
        let e = tiny_elf(true, false);
        for cut in [10, 40, e.len() - 1] {
            let err = set_section(&e[..cut], "x", b"").unwrap_err();
            assert_eq!(err.code(), opforge_core::Code::DataLoss, "cut {cut}: {err}");
        }
    }
}
