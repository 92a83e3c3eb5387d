//! Links `hookbox` and `hookbox-sandbox-exec` with packed relative relocations (`DT_RELR`,
//! `-z pack-relative-relocs`) where the linker and the C library support them.
//!
//! Why: `hookbox` is a position-independent executable of some 95 000 relative relocations;
//! in the classic `RELA` form (24 bytes each, 2.2 MB) the dynamic loader reads and applies them
//! one by one at every start, before `main`. `DT_RELR` encodes the same relocations as bitmaps
//! (a few KB), so a one-shot command (`hookbox tool`, `hookbox hooks test`) reads 2 MB less
//! and does less work before it runs (see docs/runtimes.md, "Where a one-shot call's time
//! goes"). The executable stays position-independent (ASLR is unchanged).
//!
//! The flag is probed by linking a trivial C program with the same linker: a GNU ld older than
//! 2.38, a linker without the option, or a C library without `GLIBC_ABI_DT_RELR` (glibc < 2.36)
//! leaves the binaries in the classic form, which works everywhere (a `cargo:warning` says so).

use std::path::PathBuf;
use std::process::{Command, Stdio};

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.contains("-linux-gnu") {
        return;
    }
    match probe() {
        Ok(()) => println!("cargo:rustc-link-arg-bins={FLAG}"),
        Err(why) => {
            println!("cargo:warning=linking without packed relative relocations (DT_RELR): {why}")
        }
    }
}

/// Links a trivial program with [`FLAG`] and checks that the result has a `DT_RELR` table (GNU
/// ld ignores an unknown `-z` keyword with a warning, and leaves it out without glibc's
/// `GLIBC_ABI_DT_RELR`, so a successful link alone proves nothing).
fn probe() -> Result<(), String> {
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let source = out.join("relr_probe.c");
    let binary = out.join("relr_probe");
    // Pointers in initialised data make relative relocations for the linker to pack.
    std::fs::write(
        &source,
        "static int a, b, c;\nint *table[] = {&a, &b, &c, &a, &b, &c};\n\
         int main(void) { return *table[0]; }\n",
    )
    .map_err(|e| e.to_string())?;
    let cc = std::env::var("RUSTC_LINKER")
        .or_else(|_| std::env::var("CC"))
        .unwrap_or_else(|_| "cc".to_owned());
    let linked = Command::new(&cc)
        .arg("-fPIE")
        .arg("-pie")
        .arg(FLAG)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {cc}: {e}"))?;
    if !linked.success() {
        return Err(format!("{cc} refuses {FLAG}"));
    }
    let elf = std::fs::read(&binary).map_err(|e| e.to_string())?;
    match has_relr(&elf) {
        Some(true) => Ok(()),
        Some(false) => Err(format!(
            "{cc} accepts {FLAG} but made no DT_RELR table (binutils < 2.38 or glibc < 2.36)"
        )),
        None => Err("cannot read the probe's ELF dynamic section".to_owned()),
    }
}

/// Whether a little-endian ELF64 file's dynamic section has a `DT_RELR` entry.
fn has_relr(elf: &[u8]) -> Option<bool> {
    const PT_DYNAMIC: u32 = 2;
    const DT_NULL: u64 = 0;
    const DT_RELR: u64 = 36;
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? != PT_DYNAMIC {
            continue;
        }
        let offset = usize::try_from(u64_at(ph + 0x08)?).ok()?;
        let size = usize::try_from(u64_at(ph + 0x20)?).ok()?;
        for entry in (offset..offset + size).step_by(16) {
            match u64_at(entry)? {
                DT_NULL => return Some(false),
                DT_RELR => return Some(true),
                _ => {}
            }
        }
        return Some(false);
    }
    None
}
