//! Which members of a group are worth a trial as a kernel's reference: a cheap estimate of how
//! much of a kernel's content another member holds, so that the trials (a zstd compression
//! each) run against a kernel's few likeliest references instead of every member of its
//! group. Trials against every member grow with the square of a group's targets: on jax's
//! plugin (27 targets, 64 KB kernels) they took half of a level-19 pack's time.
//!
//! The estimate is a content-defined sample: every 8-byte window of a kernel is hashed, and
//! the hashes below a threshold the whole group shares are kept, sorted and without repeats.
//! The same bytes give the same samples in any kernel, wherever they lie, so the share of a
//! kernel's samples found among another's estimates the share of its content that a prefix of
//! the other would match (containment, not similarity: a small kernel inside a large one is a
//! perfect fit). Hand-written: the MinHash crates estimate Jaccard similarity from bottom-k
//! sketches, which cannot tell a kernel contained in a larger one from a merely similar one,
//! and the whole of it is one hash per byte and a merge of sorted lists.

use rayon::prelude::*;

/// Share of their samples (of the larger sample) two kernels have in common from which they
/// count as near-identical: one of them is tried for both. jax's `gfx1030`-`gfx1036` share
/// more than that, `gfx1100` and `gfx1101` (459 bytes apart at level 4) too.
const TWINS_PERCENT: usize = 95;

/// Samples per kernel the threshold aims at for the group's largest kernel; smaller kernels
/// get fewer (the rate is one for the whole group, so that samples compare).
const SAMPLES: usize = 4096;

/// The members each kernel is tried against first (beside the earlier root of its target):
/// its `count` likeliest references by the estimate, best first, ties to the lower index,
/// skipping a member near-identical to one already taken (see [`TWINS_PERCENT`]); `usable(i, j)` says
/// whether member `j` may be `i`'s reference at all.
pub(super) fn likeliest_references(
    kernels: &[&[u8]],
    count: usize,
    usable: impl Fn(usize, usize) -> bool,
) -> Vec<Vec<usize>> {
    let largest = kernels.iter().map(|k| k.len()).max().unwrap_or(0);
    let threshold = threshold(largest);
    let samples: Vec<Vec<u64>> = kernels.par_iter().map(|k| sample(k, threshold)).collect();
    let n = kernels.len();
    // `shared[i][j]`: the samples `i` and `j` have in common, each pair counted once.
    let mut shared = vec![vec![0usize; n]; n];
    for i in 0..n {
        for j in i + 1..n {
            let both = common(&samples[i], &samples[j]);
            (shared[i][j], shared[j][i]) = (both, both);
        }
    }
    // Whether two kernels' samples are nearly the same: either serves a third kernel as well
    // as the other, so that a kernel tried against one need not be tried against both.
    let twins = |a: usize, b: usize| {
        shared[a][b] * 100 >= TWINS_PERCENT * samples[a].len().max(samples[b].len())
    };
    (0..n)
        .map(|i| {
            let mut ranked: Vec<usize> = (0..n).filter(|&j| j != i && usable(i, j)).collect();
            ranked.sort_by_key(|&j| (std::cmp::Reverse(shared[i][j]), j));
            let mut chosen: Vec<usize> = Vec::with_capacity(count);
            for j in ranked {
                if chosen.len() == count {
                    break;
                }
                if !chosen.iter().any(|&c| twins(c, j)) {
                    chosen.push(j);
                }
            }
            chosen
        })
        .collect()
}

/// The hash below which a window is sampled: about [`SAMPLES`] windows of a kernel of
/// `largest` bytes, every window of a kernel of up to that many.
fn threshold(largest: usize) -> u64 {
    let rate_log = (largest / SAMPLES).max(1).ilog2();
    u64::MAX >> rate_log
}

/// The sorted, distinct sampled hashes of `kernel`'s 8-byte windows.
fn sample(kernel: &[u8], threshold: u64) -> Vec<u64> {
    let mut samples: Vec<u64> = kernel
        .windows(8)
        .map(|w| {
            let word = u64::from_le_bytes(w.try_into().expect("8-byte window"));
            // A multiplicative hash mixed down: windows differing in any byte spread apart.
            let h = word.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^ (h >> 29)
        })
        .filter(|&h| h <= threshold)
        .collect();
    samples.sort_unstable();
    samples.dedup();
    samples
}

/// Samples `a` and `b` (sorted, distinct) have in common.
fn common(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> Vec<u8> {
        std::fs::read(kpack_testkit::fixture(rel)).unwrap()
    }

    #[test]
    fn a_kernel_s_likeliest_reference_is_its_sibling_target_not_another_kernel() {
        // One kernel for gfx900 and gfx906 (near twins) and another library's gfx90a kernel.
        let gfx900 = fixture(
            "shards/shard-a/demo_lib_gfx90X/demo/stage/lib/rocblas/library/Kernels.so-000-gfx900.hsaco",
        );
        let gfx906 = fixture(
            "shards/shard-a/demo_lib_gfx90X/demo/stage/lib/rocblas/library/Kernels.so-000-gfx906.hsaco",
        );
        let other = fixture("offload/mk_gfx90a_xnackp.co");
        let kernels: [&[u8]; 3] = [&other, &gfx900, &gfx906];
        let chosen = likeliest_references(&kernels, 1, |_, _| true);
        assert_eq!(chosen[1], [2]);
        assert_eq!(chosen[2], [1]);
    }

    #[test]
    fn a_kernel_inside_a_larger_one_is_contained_whatever_the_rest() {
        let small: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i * 7919).to_le_bytes())
            .collect();
        let mut large = vec![0x5au8; 50_000];
        large.extend_from_slice(&small);
        large.extend((0..40_000u32).flat_map(|i| (i * 104_729 + 3).to_le_bytes()));
        let unrelated: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i * 65_537 + 11).to_le_bytes())
            .collect();
        let kernels: [&[u8]; 3] = [&small, &unrelated, &large];
        assert_eq!(likeliest_references(&kernels, 2, |_, _| true)[0], [2, 1]);
        // An unusable reference is never offered.
        assert_eq!(likeliest_references(&kernels, 2, |_, j| j != 2)[0], [1]);
    }
}
