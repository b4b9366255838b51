//! `kpack inspect PATH...`

use std::path::PathBuf;
use std::process::ExitCode;

use kpack_pipeline::inspect::{self, Details, FileReport};
use kpack_pipeline::kpacked::{Outcome, ResolveReport};

use crate::output::{self, Error, grouped};

#[derive(clap::Args)]
pub struct Args {
    /// Files, directories (searched recursively), wheels (`.whl`) or tarballs (`.tar.zst`,
    /// `.tar.xz`, `.tar.gz`, `.tar`), whose members are read in place as `<path>!<member>`.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print JSON (one object per file; see docs/json.md for the schema).
    #[arg(long)]
    json: bool,
    /// For kpacked binaries: per wrapper and target, which archive the runtime would load
    /// the code object from, or why none.
    #[arg(long)]
    resolve: bool,
    /// With --resolve: the targets to look up (the GPU's ISA, `gfx90a:xnack-`); default:
    /// every target of the archives found.
    #[arg(long = "target", requires = "resolve")]
    targets: Vec<String>,
}

/// One file's JSON: the inspection, with `resolve` for kpacked binaries under `--resolve`.
#[derive(serde::Serialize)]
struct Resolved<'a> {
    #[serde(flatten)]
    inspection: &'a inspect::Inspection,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolve: Option<ResolveReport>,
}

pub fn run(args: Args) -> Result<ExitCode, Error> {
    let files = kpack_pipeline::expand_inputs(&args.paths)?;
    let bar = output::progress(files.len() as u64, "inspecting");
    let mut json = Vec::new();
    let mut failed = false;
    for path in &files {
        bar.inc(1);
        kpack_inputs::inspect(path, args.paths.contains(path), &mut |inspection| {
            // A marker's search paths are relative to the installed binary: only a file
            // given as itself (not a member of a wheel or tarball) resolves.
            let mut resolve = None;
            let itself = inspection.path == path.display().to_string();
            if args.resolve && itself && inspection.result.is_ok() {
                match kpack_pipeline::kpacked::resolve_file(path, &args.targets) {
                    Ok(r) => resolve = r,
                    Err(err) => {
                        failed = true;
                        bar.suspend(|| output::print_error(&err));
                    }
                }
            }
            match &inspection.result {
                Ok(r) if !args.json => bar.suspend(|| {
                    print_human(r);
                    if let Some(res) = &resolve {
                        print_resolve(res);
                    }
                }),
                Ok(_) => {}
                Err(err) => {
                    failed = true;
                    bar.suspend(|| output::print_error(err));
                }
            }
            if args.json {
                json.push((inspection, resolve));
            }
        });
    }
    bar.finish_and_clear();
    if args.json {
        let files: Vec<Resolved<'_>> = json
            .iter()
            .map(|(inspection, resolve)| Resolved {
                inspection,
                resolve: resolve.clone(),
            })
            .collect();
        output::print_json(&files)?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print_human(r: &FileReport) {
    match &r.details {
        Details::Elf(elf) => {
            let format = if r.kind == "pe" { "PE" } else { "ELF" };
            outln!("{}: {format} {}, {}", r.path, elf.elf_type, elf.state);
            print_elf(elf, "  ");
        }
        Details::Ar { members } => {
            outln!("{}: ar archive, {} ELF members", r.path, members.len());
            for m in members {
                outln!(
                    "  member {}: ELF {}, {}",
                    m.member.as_deref().unwrap_or("?"),
                    m.elf_type,
                    m.state
                );
                print_elf(m, "    ");
            }
        }
        Details::Bundles { bundles } => {
            outln!("{}: {}", r.path, r.kind);
            for b in bundles {
                print_bundle(b, "  ");
            }
        }
        Details::CodeObject(co) => outln!(
            "{}: code object for {} (code object v{}), {} bytes",
            r.path,
            co.target,
            co.code_object_version,
            grouped(co.size)
        ),
        Details::Archive(a) => {
            outln!(
                "{}: kpack archive, group {}, family {}, scheme {}, {} entries",
                r.path,
                a.group_name,
                a.gfx_arch_family,
                a.compression_scheme,
                a.entries.len()
            );
            outln!("  gfx_arches: {}", a.gfx_arches.join(", "));
        }
        Details::Offload { offload_images } => {
            outln!("{}: LLVM offload binary", r.path);
            print_images(offload_images, "  ");
        }
        Details::None {} => outln!("{}: {}", r.path, r.kind),
    }
    if !r.totals.is_empty() {
        outln!("  totals:");
        for t in &r.totals {
            outln!(
                "    {:<28} {:>6} objects {:>16} bytes{}",
                t.target,
                t.count,
                grouped(t.bytes),
                portable_note(t.portable)
            );
        }
    }
}

fn print_resolve(r: &ResolveReport) {
    outln!("  resolve (as the runtime, from {}):", r.binary.display());
    for p in &r.patterns {
        outln!("    search path {}", p.display());
    }
    for a in &r.archives {
        match &a.error {
            None => outln!(
                "    archive {}: {}",
                a.path.display(),
                a.gfx_arches.join(", ")
            ),
            Some(e) => outln!("    archive {}: unreadable: {e}", a.path.display()),
        }
    }
    for w in &r.wrappers {
        match (&w.key, &w.marker_error) {
            (Some(key), _) => outln!("    wrapper {} ({key}):", w.wrapper),
            (None, e) => outln!(
                "    wrapper {}: {}",
                w.wrapper,
                e.as_deref().unwrap_or_default()
            ),
        }
        if w.targets.is_empty() && w.key.is_some() {
            outln!("      no archive found at the search paths");
        }
        for t in &w.targets {
            match &t.outcome {
                Outcome::Found { .. } => outln!("      {:<24} {}", t.target, t.outcome),
                missing => {
                    let tried: Vec<String> =
                        t.tried.iter().map(|p| p.display().to_string()).collect();
                    outln!(
                        "      {:<24} MISSING: {missing}; tried {}",
                        t.target,
                        tried.join(", ")
                    );
                }
            }
        }
    }
}

fn print_elf(elf: &inspect::ElfReport, indent: &str) {
    if elf.state == "debug-only" {
        outln!("{indent}a separated debug file (objcopy --only-keep-debug): no device code");
    }
    if let Some(s) = &elf.fatbin {
        outln!(
            "{indent}.hip_fatbin: offset {:#x}, vaddr {:#x}, {} bytes{}",
            s.offset,
            s.vaddr,
            grouped(s.size),
            if s.nobits { " (NOBITS)" } else { "" }
        );
    }
    outln!(
        "{indent}{} wrappers -> {} bundles",
        elf.wrappers.len(),
        elf.bundles.len()
    );
    for w in &elf.wrappers {
        let target = w
            .bundle
            .map(|b| format!("bundle {b}"))
            .or_else(|| w.target_vaddr.map(|v| format!("{v:#x}")))
            .unwrap_or_else(|| "unresolved".to_owned());
        outln!(
            "{indent}  wrapper {} {} v{} pointer {} -> {target}, reserved1 {}",
            w.index,
            w.magic,
            w.version,
            w.pointer,
            w.reserved1
        );
        match &w.marker {
            Some(inspect::MarkerReport::Decoded {
                kernel_name,
                search_paths,
                key,
            }) => outln!(
                "{indent}    marker: kernel {kernel_name} (key {key}), search paths {}",
                search_paths.join(", ")
            ),
            Some(inspect::MarkerReport::Error { error }) => {
                outln!("{indent}    marker: unreadable: {error}")
            }
            None => {}
        }
    }
    for b in &elf.bundles {
        print_bundle(b, indent);
    }
    print_images(&elf.offload_images, indent);
    for r in &elf.rdc_sections {
        outln!(
            "{indent}RDC section {} ({}): {} bytes",
            r.name,
            r.bundle_id,
            grouped(r.size)
        );
    }
}

fn print_images(images: &[inspect::OffloadImageReport], indent: &str) {
    for i in images {
        outln!(
            "{indent}offload image {} at {:#x} (binary v{} at {:#x}): {} {}, {} {}, {} bytes",
            i.index,
            i.offset,
            i.version,
            i.binary_offset,
            i.offload_kind,
            i.image_kind,
            i.triple.as_deref().unwrap_or("-"),
            i.arch.as_deref().unwrap_or("-"),
            grouped(i.size)
        );
    }
}

fn print_bundle(b: &inspect::BundleReport, indent: &str) {
    let format = match (b.version, b.method) {
        (Some(v), Some(m)) => format!("CCOB v{v} {m}, hash {}", b.hash.unwrap_or("-")),
        _ => "uncompressed".to_owned(),
    };
    outln!(
        "{indent}bundle {} at {:#x}: {}, {} bytes stored, {} bytes bundled, {} entries",
        b.index,
        b.offset,
        format,
        grouped(b.size),
        grouped(b.uncompressed_size),
        b.entries.len()
    );
    for e in &b.entries {
        outln!(
            "{indent}  {:<48} {:>14} bytes{}",
            e.bundle_id,
            grouped(e.size),
            portable_note(e.portable)
        );
    }
}

/// What the human output says after a portable SPIR-V entry or total.
fn portable_note(portable: bool) -> &'static str {
    if portable {
        "  portable SPIR-V (for GPUs without native code)"
    } else {
        ""
    }
}
