//! What the binaries cost at every start, before `main`: their relative relocations are packed
//! (`DT_RELR`, see the crate's `build.rs`), so the dynamic loader of a one-shot command does not
//! read and apply ~95 000 24-byte `RELA` entries one by one.

use std::path::Path;

const DT_NULL: u64 = 0;
const DT_RELACOUNT: u64 = 0x6fff_fff9;
const DT_RELR: u64 = 36;
const DT_RELRSZ: u64 = 35;

/// The `(tag, value)` entries of a little-endian ELF64 file's dynamic section.
fn dynamic_entries(path: &Path) -> Vec<(u64, u64)> {
    let elf = std::fs::read(path).unwrap();
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "{}: not ELF64 LE",
        path.display()
    );
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let dynamic = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&ph| u32_at(ph) == 2)
        .unwrap_or_else(|| panic!("{}: no PT_DYNAMIC", path.display()));
    let (offset, size) = (
        u64_at(dynamic + 0x08) as usize,
        u64_at(dynamic + 0x20) as usize,
    );
    (offset..offset + size)
        .step_by(16)
        .map(|at| (u64_at(at), u64_at(at + 8)))
        .take_while(|&(tag, _)| tag != DT_NULL)
        .collect()
}

fn assert_packed(path: &Path) {
    let entries = dynamic_entries(path);
    let value = |tag| entries.iter().find(|(t, _)| *t == tag).map(|(_, v)| *v);
    assert!(
        value(DT_RELR).is_some() && value(DT_RELRSZ).is_some_and(|size| size > 0),
        "{}: no packed relative relocations (DT_RELR); the linker or glibc on this machine \
         cannot make them (build.rs printed a cargo:warning)",
        path.display()
    );
    // What is left in RELA is the few relocations against symbols, not the relative ones.
    let rela_relative = value(DT_RELACOUNT).unwrap_or(0);
    assert!(
        rela_relative < 100,
        "{}: {rela_relative} relative relocations still in RELA",
        path.display()
    );
}

#[test]
fn the_cli_binary_has_packed_relative_relocations() {
    assert_packed(Path::new(env!("CARGO_BIN_EXE_hookbox")));
}

#[test]
fn the_sandbox_launcher_has_packed_relative_relocations() {
    assert_packed(Path::new(env!("CARGO_BIN_EXE_hookbox-sandbox-exec")));
}
