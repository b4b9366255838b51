//! Archive sizes and pack time of the three compression choices (`none`, `zstd` = v1 zstd-3,
//! `unified` = format v2 at its default level 19) on real inputs: jax-rocm7-plugin 0.12.0's
//! `_linalg.so` (CCOB, 27 targets), Debian's librocblas.so.5.2 (CCOB, 14 targets) and
//! bookworm's librocsparse.so.0.1 (uncompressed bundles, 7 targets).
//!
//! Per input it prints: the `.hip_fatbin` size (CCOB or plain bundles); the v1 zstd-3 total of
//! the per-target archives (every code object, streamed); and on a sample (every code object of
//! `_linalg.so`; for the two large libraries, whole bundles spread over the library up to
//! 40 MB of code objects, so that level 19 stays within minutes on 2 cores): all
//! targets in one v2 archive, per-target v2 against v1 zstd-3 (total and worst target), the
//! lower bound `zstd -19 --long=27` over the sample's code objects as one stream (no random
//! access), and the time of the v2 pack against `zstd -19 -T2` over the same bytes; and for the
//! first target of the whole library, its single-target v2 archive against v1 and the same
//! lower bound over that target's code objects (the floor of a single-target archive). For a
//! sampled input the full-library v2 size is projected from the sample's v2/v1 ratio.
//! The figures that are sizes only are measured for every input at once, which keeps both
//! cores busy; the two pack times are measured one after the other with nothing else running.
//!
//! Then the many-target rows (issue 38): fat binaries packed whole by the `kpack` binary,
//! `pack --compression unified --threads <n>`, against `zstd -19 -T<n>` over the same code
//! objects concatenated, both pinned to `n` cores with `taskset`, at n = 1 and 2: the time
//! ratio (target <= 1.3x) and each one's speed-up on 2 cores (pack's >= 0.9x zstd's own).
//! The input: jax-rocm7-plugin 0.12.0's `_linalg.so`, `_prng.so` and `_solver.so` (27
//! targets, 2.9 MB of 64 KB kernels), too small for zstd's own threads (`zstd -19` codes
//! jobs of 32 MB: one job here, so its speed-up is below 1). The same comparison on an input
//! where both speed-ups mean something (cupy's `thrust`: 9 targets, 76.6 MB of 8-10 MB
//! kernels, three zstd jobs) is the `unified_threads` bench's, which packs it and `zstd -19`
//! at 1 and 2 threads; a row of it here would measure the same four commands again (75 s of
//! CI). The figures are the fastest of 3 rounds that run every command in turn (a round takes
//! a few seconds; the machines here vary by 5-25 % within minutes).
//!
//! Needs the corpus from `scripts/setup.sh` and `zstd` on PATH. Arguments (after `--`) that
//! are not options keep only the inputs whose name contains one of them
//! (`cargo bench -p kpack-cli --bench compression -- _linalg`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kpack_archive::{ArchiveWriter, Compression, KernelCompressor, binary_key};
use kpack_pipeline::SourceError;
use kpack_pipeline::source::{DeviceCode, Visitor, walk_mapped};
use kpack_testkit::measured::{ChildRun, run_measured};

/// Code-object bytes sampled from each large library (`KPACK_BENCH_SAMPLE_MB` overrides).
fn sample_bytes() -> u64 {
    let mb = std::env::var("KPACK_BENCH_SAMPLE_MB").ok();
    mb.and_then(|v| v.parse().ok()).unwrap_or(40) << 20
}

/// (binary key, target, code object).
type Kernel = (String, String, Vec<u8>);

struct Collect {
    name: String,
    /// Keep bundle `b` when `b % stride == 0`, until `budget` bytes.
    stride: usize,
    budget: u64,
    kept: u64,
    bundle: Option<usize>,
    take: bool,
    sample: Vec<Kernel>,
    /// v1 zstd-3 of every code object, and their raw size.
    v1_full: u64,
    raw_full: u64,
    /// Every code object of the library's first target, for the single-target figures.
    first_target: Vec<Kernel>,
    compressor: KernelCompressor,
}

impl Visitor for Collect {
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        let data = code.data;
        self.raw_full += data.len() as u64;
        self.v1_full += self.compressor.prepare(data)?.stored_len() as u64;
        let target = code.target().to_string();
        let wrapper = code.wrappers.first().copied().unwrap_or(code.bundle);
        let key = binary_key(&self.name, wrapper as u32);
        if self.first_target.first().is_none_or(|k| k.1 == target) {
            self.first_target
                .push((key.clone(), target.clone(), data.to_vec()));
        }
        // Whole bundles (every target of a kernel), decided at a bundle's first code object.
        if self.bundle != Some(code.bundle) {
            self.bundle = Some(code.bundle);
            self.take = code.bundle.is_multiple_of(self.stride) && self.kept < self.budget;
        }
        if self.take {
            self.kept += data.len() as u64;
            self.sample.push((key, target, data.to_vec()));
        }
        Ok(())
    }
}

/// The device code of `path` walked by [`Collect`], sampling every `stride`th bundle up to
/// `budget` bytes.
fn collect(path: &Path, stride: usize, budget: u64) -> Collect {
    let opened = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file = kpack_pipeline::map_file(&opened, path).unwrap_or_else(|e| panic!("{e}"));
    let mut collect = Collect {
        name: path.file_name().unwrap().to_string_lossy().into_owned(),
        stride,
        budget,
        kept: 0,
        bundle: None,
        take: false,
        sample: Vec::new(),
        v1_full: 0,
        raw_full: 0,
        first_target: Vec::new(),
        compressor: KernelCompressor::new(Compression::zstd()),
    };
    walk_mapped(&file, &mut collect).unwrap();
    collect
}

fn corpus() -> PathBuf {
    std::env::var_os("KPACK_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/tmp/kpack-corpus".into())
}

fn fatbin_size(path: &Path) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_kpack"))
        .args(["inspect", "--json"])
        .arg(path)
        .output()
        .expect("kpack inspect");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("inspect JSON");
    v[0]["details"]["fatbin"]["size"]
        .as_u64()
        .expect("a .hip_fatbin")
}

/// The size of one archive of `kernels` with `compression`, and the time to write it.
fn archive(kernels: &[&Kernel], compression: Compression) -> (u64, Duration) {
    let start = Instant::now();
    let mut w = ArchiveWriter::new("bench", "bench", compression);
    for (key, target, data) in kernels {
        w.add(key, target, data.as_slice(), &[]).unwrap();
    }
    let mut out = Vec::new();
    let n = w.write_to(&mut out).unwrap();
    (n, start.elapsed())
}

/// `zstd ARGS` over `data` on stdin: compressed size and time.
fn zstd(args: &[&str], data: &[&Kernel]) -> (u64, Duration) {
    let start = Instant::now();
    let mut child = Command::new("zstd")
        .args(args)
        .args(["-c", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("zstd is required (scripts/setup.sh installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let bytes: Vec<Vec<u8>> = data.iter().map(|k| k.2.clone()).collect();
    let feeder = std::thread::spawn(move || {
        for b in bytes {
            stdin.write_all(&b).unwrap();
        }
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success());
    (out.stdout.len() as u64, start.elapsed())
}

fn mb(n: u64) -> String {
    format!("{:.3} MB", n as f64 / 1e6)
}

/// An input walked: its name, what [`Collect`] gathered and its `.hip_fatbin` size.
struct Walked {
    name: &'static str,
    collect: Collect,
    fatbin: u64,
}

impl Walked {
    fn sample(&self) -> Vec<&Kernel> {
        self.collect.sample.iter().collect()
    }
    fn first_target(&self) -> Vec<&Kernel> {
        self.collect.first_target.iter().collect()
    }
}

/// The figures of one input that are sizes only: per target of the sample (target, v1
/// zstd-3, v2), the sample's lower bound, and the first target of the whole library (v2, v1,
/// lower bound).
struct Sizes {
    per_target: Vec<(String, u64, u64)>,
    bound: u64,
    one: (u64, u64, u64),
}

/// [`Sizes`] but the single-target v2 archive (the caller codes it beside): the per-target
/// archives are coded side by side, a single-target archive's groups holding one kernel each
/// and being coded one after the other, on one core.
fn sizes_but_one_v2(input: &Walked) -> (Vec<(String, u64, u64)>, u64, u64, u64) {
    let all = input.sample();
    let mut targets: Vec<&str> = all.iter().map(|k| k.1.as_str()).collect();
    targets.sort();
    targets.dedup();
    let per_target = std::thread::scope(|s| {
        let coders: Vec<_> = targets
            .iter()
            .map(|t| {
                let of: Vec<&Kernel> = all.iter().copied().filter(|k| k.1 == *t).collect();
                s.spawn(move || {
                    (
                        t.to_string(),
                        archive(&of, Compression::zstd()).0,
                        archive(&of, Compression::unified()).0,
                    )
                })
            })
            .collect();
        coders.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let (bound, _) = zstd(&["-19", "--long=27", "-T2"], &all);
    let one = input.first_target();
    let one_v1 = archive(&one, Compression::zstd()).0;
    let one_bound = zstd(&["-19", "--long=27", "-T2"], &one).0;
    (per_target, bound, one_v1, one_bound)
}

fn main() {
    let c = corpus();
    let jax = std::fs::read_dir(c.join("wx"))
        .expect("corpus wx/: run scripts/setup.sh")
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("jax_rocm7_plugin-0.12.0-")
        })
        .expect("jax-rocm7-plugin 0.12.0 unpacked");
    let inputs: [(&str, PathBuf, usize, u64); 3] = [
        (
            "_linalg.so (jax 0.12)",
            jax.join("jax_rocm7_plugin/_linalg.so"),
            1,
            u64::MAX,
        ),
        (
            "librocblas.so.5.2",
            c.join("x/librocblas5_7.2.4-1~exp1/usr/lib/x86_64-linux-gnu/librocblas.so.5.2"),
            8,
            sample_bytes(),
        ),
        (
            "librocsparse.so.0.1",
            c.join("x/librocsparse0_5.3.0+dfsg-2/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"),
            16,
            sample_bytes(),
        ),
    ];
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let walked: Vec<Walked> = inputs
        .into_iter()
        .filter(|(name, ..)| only.is_empty() || only.iter().any(|o| name.contains(o.as_str())))
        .map(|(name, path, stride, budget)| {
            let collect = collect(&path, stride, budget);
            Walked {
                name,
                collect,
                fatbin: fatbin_size(&path),
            }
        })
        .collect();
    // The figures that are sizes only, of every input at once: the single-target v2 archives
    // (one core's work each, see `sizes_but_one_v2`), each on a thread pool of its own so
    // that they do not queue behind the rest in the global one, beside the rest; the cores
    // stay busy instead of one of them waiting for the largest single-target archive.
    let sizes: Vec<Sizes> = std::thread::scope(|s| {
        let one_v2: Vec<_> = walked
            .iter()
            .map(|input| {
                s.spawn(move || {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(1)
                        .build()
                        .unwrap();
                    pool.install(|| archive(&input.first_target(), Compression::unified()).0)
                })
            })
            .collect();
        let rest: Vec<_> = walked.iter().map(sizes_but_one_v2).collect();
        rest.into_iter()
            .zip(one_v2)
            .map(|((per_target, bound, one_v1, one_bound), v2)| Sizes {
                per_target,
                bound,
                one: (v2.join().unwrap(), one_v1, one_bound),
            })
            .collect()
    });
    // The pack times, one input at a time, with nothing else running.
    for (input, sizes) in walked.iter().zip(sizes) {
        let all = input.sample();
        let (v2_all, v2_time) = archive(&all, Compression::unified());
        let (_, zstd19_time) = zstd(&["-19", "-T2"], &all);
        print(input, &sizes, v2_all, v2_time, zstd19_time);
    }
    if only.is_empty() || only.iter().any(|o| "many targets".contains(o.as_str())) {
        let jax = jax.join("jax_rocm7_plugin");
        let jax_inputs = ["_linalg.so", "_prng.so", "_solver.so"].map(|n| jax.join(n));
        many_targets(
            "jax-rocm7-plugin 0.12.0 _linalg.so, _prng.so, _solver.so",
            &jax_inputs,
            JAX_ROUNDS,
        );
    }
}

/// Rounds of the many-target row (see the module doc); each figure is the fastest of its
/// command's.
const JAX_ROUNDS: usize = 3;

/// One many-target row (see the module doc): `inputs` packed into one archive, `rounds` times.
fn many_targets(name: &str, inputs: &[PathBuf], rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    // The same code objects for zstd, concatenated in the order pack reads them.
    let mut code_objects = Vec::new();
    let mut targets = std::collections::BTreeSet::new();
    let mut kernels = std::collections::BTreeSet::new();
    for path in inputs {
        for (key, target, data) in collect(path, 1, u64::MAX).sample {
            targets.insert(target);
            kernels.insert(key);
            code_objects.extend_from_slice(&data);
        }
    }
    let concatenated = dir.path().join("code-objects");
    std::fs::write(&concatenated, &code_objects).unwrap();
    let (archive, stream) = (dir.path().join("many.kpack"), dir.path().join("many.zst"));
    let kpack = Path::new(env!("CARGO_BIN_EXE_kpack"));
    // (pack, zstd) per core count: the fastest run of each.
    let mut fastest = [[None::<ChildRun>; 2]; 2];
    for _ in 0..rounds {
        for (n, row) in fastest.iter_mut().enumerate() {
            let (cores, threads) = (["0", "0,1"][n], ["1", "2"][n]);
            let mut pack: Vec<&Path> = vec![Path::new("-c"), Path::new(cores), kpack];
            pack.extend([Path::new("pack"), Path::new("-o"), &archive]);
            pack.extend(inputs.iter().map(PathBuf::as_path));
            pack.extend(["--compression", "unified", "--threads", threads].map(Path::new));
            let t = format!("-T{threads}");
            let zstd = ["-c", cores, "zstd", "-19", &t, "-q", "-f", "-o"].map(Path::new);
            let zstd = [&zstd[..], &[&stream, &concatenated]].concat();
            for (slot, args) in row.iter_mut().zip([pack, zstd]) {
                let run = run_measured(Path::new("taskset"), &args);
                if slot.is_none_or(|f| run.wall < f.wall) {
                    *slot = Some(run);
                }
            }
        }
    }
    let [[pack1, zstd1], [pack2, zstd2]] = fastest.map(|row| row.map(Option::unwrap));
    println!(
        "many targets: {name} ({} targets, {} kernels, {} of code objects), fastest of \
         {rounds} round{}, taskset",
        targets.len(),
        kernels.len(),
        mb(code_objects.len() as u64),
        if rounds == 1 { "" } else { "s" }
    );
    println!("  cores  pack unified (CPU s)   zstd -19 -T<n> (CPU s)   ratio (target <= 1.3x)");
    for (n, (pack, zstd)) in [(pack1, zstd1), (pack2, zstd2)].iter().enumerate() {
        println!(
            "  {:>5}  {:>6.2} s ({:>5.2})      {:>6.2} s ({:>5.2})          {:.2}x",
            n + 1,
            pack.wall.as_secs_f64(),
            pack.cpu.as_secs_f64(),
            zstd.wall.as_secs_f64(),
            zstd.cpu.as_secs_f64(),
            pack.wall.as_secs_f64() / zstd.wall.as_secs_f64()
        );
    }
    let speed_up = |one: ChildRun, two: ChildRun| one.wall.as_secs_f64() / two.wall.as_secs_f64();
    let (pack_speed_up, zstd_speed_up) = (speed_up(pack1, pack2), speed_up(zstd1, zstd2));
    println!(
        "  speed-up on 2 cores: pack {pack_speed_up:.2}x, zstd {zstd_speed_up:.2}x \
         (pack's {:.2}x zstd's own, target >= 0.9x)",
        pack_speed_up / zstd_speed_up
    );
    println!(
        "  sizes: unified archive {} bytes, zstd -19 stream {} bytes",
        archive.metadata().unwrap().len(),
        stream.metadata().unwrap().len()
    );
}

/// Prints the figures of one input (see the module doc).
fn print(input: &Walked, sizes: &Sizes, v2_all: u64, v2_time: Duration, zstd19_time: Duration) {
    let (name, collect, fatbin) = (input.name, &input.collect, input.fatbin);
    let all = input.sample();
    let raw_sample: u64 = all.iter().map(|k| k.2.len() as u64).sum();
    let (mut v1_targets, mut v2_targets, mut worst) = (0, 0, (0.0f64, ""));
    for (t, v1, v2) in &sizes.per_target {
        v1_targets += v1;
        v2_targets += v2;
        let ratio = *v2 as f64 / *v1 as f64;
        if ratio > worst.0 {
            worst = (ratio, t);
        }
    }
    let sampled = raw_sample < collect.raw_full;
    println!(
        "{name}: {} targets, {} of code objects{}",
        sizes.per_target.len(),
        mb(collect.raw_full),
        if sampled {
            let bundles = all
                .iter()
                .map(|k| &k.0)
                .collect::<std::collections::BTreeSet<_>>();
            format!(
                ", sample {} ({} bundles, every {}th)",
                mb(raw_sample),
                bundles.len(),
                collect.stride
            )
        } else {
            String::new()
        }
    );
    println!("  .hip_fatbin                           {}", mb(fatbin));
    println!(
        "  v1 zstd-3, per-target archives        {} ({:.2}x the fatbin)",
        mb(collect.v1_full),
        collect.v1_full as f64 / fatbin as f64
    );
    let scale = collect.v1_full as f64 / v1_targets as f64;
    println!(
        "  v2 unified, all targets in one        {}{} ({:.2}x the fatbin, {:.2}x v1)",
        mb(v2_all),
        if sampled {
            format!(
                " on the sample, {} projected",
                mb((v2_all as f64 * scale) as u64)
            )
        } else {
            String::new()
        },
        v2_all as f64 * scale / fatbin as f64,
        v2_all as f64 / v1_targets as f64
    );
    println!(
        "  v2 unified, per target                {:.3}x v1 zstd-3 (worst {} {:.3}x)",
        v2_targets as f64 / v1_targets as f64,
        worst.1,
        worst.0
    );
    println!(
        "  lower bound zstd -19 --long=27        {} ({:.3}x v1 zstd-3 of the same bytes)",
        mb(sizes.bound),
        sizes.bound as f64 / v1_targets as f64
    );
    println!(
        "  pack time: v2 all targets {:.1} s, zstd -19 -T2 {:.1} s ({:.2}x)",
        v2_time.as_secs_f64(),
        zstd19_time.as_secs_f64(),
        v2_time.as_secs_f64() / zstd19_time.as_secs_f64()
    );
    // One target of the whole library: its v2 archive, and what even one stream without
    // random access reaches on the same bytes (the floor of a single-target archive).
    let one = input.first_target();
    let (v2, v1, bound) = sizes.one;
    println!(
        "  one target, whole library ({}, {} code objects): v2 {:.3}x v1 zstd-3, \
         lower bound zstd -19 --long=27 {:.3}x",
        one[0].1,
        one.len(),
        v2 as f64 / v1 as f64,
        bound as f64 / v1 as f64
    );
}
