//! The `unified` writer's coder (the `write` feature): choosing each kernel's reference by
//! trial compressions and coding the group's frames, on all cores, within a memory gate.
//! The format and the method are described in [`crate::unified`]'s module doc.
//!
//! `contexts` holds the zstd side: each compression's search and context, within the gate.

mod contexts;
mod sketch;

use std::sync::Mutex;

use rayon::prelude::*;

use crate::ArchiveError;
use crate::prefix_template::{self, PrefixTemplate};
use crate::unified::{DICTIONARY_MAGIC, MAX_WINDOW_LOG};
pub use contexts::CONTEXT_BUDGET;
use contexts::{
    CONTEXTS, Contexts, Search, TemplatePool, compress, context_estimate, long_distance_matching,
    prefixed_window_log, trial, trials_against, zstd_failure,
};
pub(crate) use contexts::{frame_size, within_frame_size};

/// Bytes of candidate reference content (the latest root of each target) that stay
/// candidates across groups, oldest dropped first; the writer holds their ordinals, not
/// their content.
pub const RETAINED_BUDGET: usize = 96 << 20;

/// Members of its group each kernel is tried against as a reference at first (beside the
/// earlier root of its target): its likeliest by [`sketch`], one of each set of near-identical
/// members, instead of every member. On jax's plugin (groups of 27 targets) 8 took 0.58x
/// the CPU of trying every pair for archives 0.04 % larger; 4 and 6 made them 1-5 % larger.
const TRIAL_CANDIDATES: usize = 8;

/// Bytes of one group's kernels the writer holds before coding them: a kernel's targets are
/// coded together, and a group larger than this is coded in parts.
pub const GROUP_BUDGET: usize = 128 << 20;

/// A kernel of a group as stored, in writing order: which member it is, its frame, and the
/// ordinal of the frame it is coded against.
pub(crate) struct Coded {
    pub(crate) member: usize,
    pub(crate) frame: Vec<u8>,
    pub(crate) reference: Option<u32>,
}

/// A root of an earlier group, a candidate reference for its target. Only its ordinal is
/// kept: its content is read back from the archive (one standalone frame) when a group
/// needs it, so that a writer holds no kernel between groups.
struct Candidate {
    ordinal: u32,
    arch: String,
    len: usize,
}

/// Where a kernel sits in its group's forest.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    /// Standalone.
    Root,
    /// Coded against a root (of the group, or the latest root of its target).
    Middle,
    /// Coded against a root or a middle kernel.
    Leaf,
}

/// Where a kernel's reference is.
#[derive(Clone, Copy)]
enum Parent {
    Member(usize),
    Earlier,
}

/// Trial sizes of one group: `alone[i]`, `pair[i][j]` (member `i` coded against member `j`)
/// and `earlier[i]` (against the latest root of its target, if any).
struct Trials {
    alone: Vec<usize>,
    pair: Vec<Vec<Option<usize>>>,
    earlier: Vec<Option<usize>>,
}

/// Codes kernels for a `unified` archive, choosing references (see the module doc).
pub(crate) struct Coder {
    level: i32,
    /// At most one per target, oldest first.
    candidates: Vec<Candidate>,
    /// The contexts of the templates of trials and final frames, kept for the next ones.
    templates: TemplatePool,
}

impl Coder {
    pub(crate) fn new(level: i32) -> Self {
        Coder {
            level,
            candidates: Vec::new(),
            templates: TemplatePool::default(),
        }
    }

    /// Codes one group, the kernels `(arch, data)` of one binary key (distinct arches), whose
    /// frames take the ordinals from `first` on, in the order returned: roots, then middle
    /// kernels, then leaves, so that every reference is an earlier frame. `root(ordinal)`
    /// reads back the content of an earlier root; it is called by the task that needs the
    /// content (a trial, a final compression), one at a time, and the content dropped with the
    /// task, so that a group holds the earlier roots of only the tasks in flight, not one per
    /// target for the whole group.
    pub(crate) fn code_group(
        &mut self,
        first: u32,
        members: &[(&str, &[u8])],
        root: impl FnMut(u32) -> Result<Vec<u8>, ArchiveError> + Send,
    ) -> Result<Vec<Coded>, ArchiveError> {
        let root = Mutex::new(root);
        let read_back = |ordinal: u32| (*root.lock().unwrap_or_else(|e| e.into_inner()))(ordinal);
        let earlier: Vec<Option<u32>> = members
            .iter()
            .map(|(arch, data)| self.earlier_for(arch, data.len()))
            .collect();
        let contexts = Contexts::default();
        let mut trials = trials(&contexts, &self.templates, members, &earlier, &read_back)?;
        let levels = choose_forest(&contexts, members, &mut trials)?;
        let costs = Costs::new(&trials);
        let parent = |i: usize, levels: &[Level]| best_parent(&costs, levels, i);
        let mut order: Vec<usize> = Vec::with_capacity(members.len());
        for level in [Level::Root, Level::Middle, Level::Leaf] {
            order.extend((0..members.len()).filter(|&i| levels[i] == level));
        }
        let mut ordinal_of = vec![0u32; members.len()];
        // Per frame in writing order: its member, and the member or earlier root it is coded
        // against.
        let mut plan: Vec<(usize, Option<Parent>)> = Vec::with_capacity(members.len());
        // Per frame in writing order: its estimated coding time (`final_cost`).
        let mut cost: Vec<usize> = Vec::with_capacity(members.len());
        for (pos, &i) in order.iter().enumerate() {
            ordinal_of[i] = first + pos as u32;
            let (reference, trial) = match levels[i] {
                Level::Root => (None, trials.alone[i]),
                _ => match parent(i, &levels) {
                    Some((p, trial)) => (Some(p), trial),
                    None => unreachable!("choose_levels gives every non-root a parent"),
                },
            };
            plan.push((i, reference));
            cost.push(final_cost(members[i].1.len(), trial));
        }
        let reference_ordinal = |i: usize, parent: Parent| match parent {
            Parent::Member(j) => ordinal_of[j],
            Parent::Earlier => earlier[i].expect("an earlier root was tried"),
        };
        let level = self.level;
        // Kernels coded against the same member share one loaded reference on one thread
        // (`templated_children`). The others are coded one task each, taken from one queue
        // by whichever core is free, the costliest first (`final_cost`), so that no core is
        // left idle at the end of the group on a long frame started last; each frame is then
        // put back at its place in the writing order.
        let templated = templated_children(&plan, members, level);
        let mut jobs: Vec<usize> = (0..plan.len())
            .filter(|p| !templated.iter().any(|t| t.children.contains(p)))
            .collect();
        jobs.sort_by_key(|&p| (std::cmp::Reverse(cost[p]), p));
        let mut frames: Vec<(usize, Vec<u8>)> = jobs
            .into_iter()
            .par_bridge()
            .map(|p| {
                let (member, reference) = plan[p];
                let data = members[member].1;
                let frame = match reference {
                    None => compress(&contexts, data, None, level)?,
                    Some(Parent::Member(j)) => {
                        compress(&contexts, data, Some(members[j].1), level)?
                    }
                    Some(Parent::Earlier) => {
                        // Its own context: the content read back lives only for this task.
                        let content = read_back(reference_ordinal(member, Parent::Earlier))?;
                        compress(&Contexts::default(), data, Some(&content), level)?
                    }
                };
                Ok((p, frame))
            })
            .collect::<Result<_, ArchiveError>>()?;
        for group in &templated {
            frames.extend(group.code(&plan, members, &self.templates)?);
        }
        frames.sort_unstable_by_key(|&(p, _)| p);
        let coded: Vec<Coded> = frames
            .into_iter()
            .map(|(p, frame)| {
                let (member, reference) = plan[p];
                Coded {
                    member,
                    frame,
                    reference: reference.map(|r| reference_ordinal(member, r)),
                }
            })
            .collect();
        for c in &coded {
            if c.reference.is_none() {
                let (arch, data) = members[c.member];
                self.remember(ordinal_of[c.member], arch, data);
            }
        }
        Ok(coded)
    }

    /// The ordinal of the latest root of `arch` from an earlier group, if one is held and fits
    /// the window.
    fn earlier_for(&self, arch: &str, len: usize) -> Option<u32> {
        self.candidates
            .iter()
            .find(|c| c.arch == arch && c.len + len <= 1 << MAX_WINDOW_LOG)
            .map(|c| c.ordinal)
    }

    /// Keeps the root `data` of `arch`, stored as `ordinal`, as its target's candidate
    /// reference for later groups (the kernels of one library resemble each other).
    fn remember(&mut self, ordinal: u32, arch: &str, data: &[u8]) {
        if !usable_reference(data, 0) {
            return;
        }
        self.candidates.retain(|c| c.arch != arch);
        self.candidates.push(Candidate {
            ordinal,
            arch: arch.to_owned(),
            len: data.len(),
        });
        let mut retained: usize = self.candidates.iter().map(|c| c.len).sum();
        while retained > RETAINED_BUDGET {
            retained -= self.candidates.remove(0).len;
        }
    }
}

/// The trial sizes the choice of references rests on, measured in parallel in contexts of
/// `contexts`, a kernel's trials against each member together ([`trials_against`], templates
/// from `templates`); an earlier root is read back (`read_back`) by the trial that needs it.
fn trials<'m>(
    contexts: &Contexts<'m>,
    templates: &TemplatePool,
    members: &[(&str, &'m [u8])],
    earlier: &[Option<u32>],
    read_back: &(impl Fn(u32) -> Result<Vec<u8>, ArchiveError> + Sync),
) -> Result<Trials, ArchiveError> {
    let n = members.len();
    let kernels: Vec<&[u8]> = members.iter().map(|m| m.1).collect();
    let candidates = sketch::likeliest_references(&kernels, TRIAL_CANDIDATES, |i, j| {
        usable_reference(kernels[j], kernels[i].len())
    });
    // Per member, the members tried against it.
    let mut tried_against: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, references) in candidates.iter().enumerate() {
        for &j in references {
            tried_against[j].push(i);
        }
    }
    let (own, pairs) = rayon::join(
        || {
            (0..n)
                .into_par_iter()
                .with_max_len(1)
                .map(|i| {
                    let data = members[i].1;
                    let alone = trial(contexts, data, None)?;
                    let earlier = match earlier[i] {
                        Some(ordinal) => {
                            let content = read_back(ordinal)?;
                            Some(trial(&Contexts::default(), data, Some(&content))?)
                        }
                        None => None,
                    };
                    Ok((alone, earlier))
                })
                .collect::<Result<Vec<_>, ArchiveError>>()
        },
        || {
            (0..n)
                .into_par_iter()
                .with_max_len(1)
                .map(|j| {
                    let tried: Vec<&[u8]> = tried_against[j].iter().map(|&i| kernels[i]).collect();
                    trials_against(contexts, templates, &tried, members[j].1)
                })
                .collect::<Result<Vec<_>, ArchiveError>>()
        },
    );
    let mut trials = Trials {
        alone: Vec::with_capacity(n),
        pair: vec![vec![None; n]; n],
        earlier: Vec::with_capacity(n),
    };
    for (alone, earlier) in own? {
        trials.alone.push(alone);
        trials.earlier.push(earlier);
    }
    for (j, sizes) in pairs?.into_iter().enumerate() {
        for (&i, size) in tried_against[j].iter().zip(sizes) {
            trials.pair[i][j] = Some(size);
        }
    }
    Ok(trials)
}

/// The forest's levels (`choose_levels`) over the pairs tried and, for the pairs not tried,
/// their estimates through tried pairs (`through_tried_paths`); where the forest codes a
/// kernel against a member it was not tried against, that pair is tried (adding to `trials`)
/// and the forest chosen again, until every kernel's parent is a tried pair. So an estimate
/// only leads the search to a pair, and the choice rests on trials alone.
fn choose_forest<'m>(
    contexts: &Contexts<'m>,
    members: &[(&str, &'m [u8])],
    trials: &mut Trials,
) -> Result<Vec<Level>, ArchiveError> {
    let usable = |i: usize, k: usize| usable_reference(members[k].1, members[i].1.len());
    loop {
        let estimated = Trials {
            alone: trials.alone.clone(),
            pair: through_tried_paths(&trials.pair, usable),
            earlier: trials.earlier.clone(),
        };
        let levels = choose_levels(&estimated);
        let estimated = Costs::new(&estimated);
        let untried: Vec<(usize, usize)> = (0..levels.len())
            .filter(|&i| levels[i] != Level::Root)
            .filter_map(|i| match best_parent(&estimated, &levels, i) {
                Some((Parent::Member(j), _)) if trials.pair[i][j].is_none() => Some((i, j)),
                _ => None,
            })
            .collect();
        if untried.is_empty() {
            return Ok(levels);
        }
        let sizes: Vec<usize> = untried
            .par_iter()
            .with_max_len(1)
            .map(|&(i, j)| trial(contexts, members[i].1, Some(members[j].1)))
            .collect::<Result<_, ArchiveError>>()?;
        for (&(i, j), size) in untried.iter().zip(sizes) {
            trials.pair[i][j] = Some(size);
        }
    }
}

/// The pair sizes `tried`, each pair not tried given the cheapest path of tried pairs:
/// `i` against `k` estimated as `i` against `j` plus `j` against `k` (what `k` lacks of `j`,
/// the content `i` found in `j`), and so on through any chain. A kernel is tried against one
/// of each set of near-identical targets (see [`sketch`]); which of them becomes the root is
/// the forest's choice, so each kernel needs a size against each (the choice of `gfx1153`
/// over `gfx1150` as the root of jax's gfx115x must not leave `gfx1200`, tried against
/// `gfx1150`, without a parent there). `usable(i, k)` as for the candidates.
fn through_tried_paths(
    tried: &[Vec<Option<usize>>],
    usable: impl Fn(usize, usize) -> bool,
) -> Vec<Vec<Option<usize>>> {
    let n = tried.len();
    let mut path = tried.to_vec();
    for j in 0..n {
        // Row `j` does not change in its own round: `j` against itself has no size.
        let from_j = path[j].clone();
        for (i, row) in path.iter_mut().enumerate() {
            let Some(to_j) = row[j] else { continue };
            for (k, cell) in row.iter_mut().enumerate() {
                if let Some(from_j) = from_j[k]
                    && i != k
                    && cell.is_none_or(|p| to_j + from_j < p)
                {
                    *cell = Some(to_j + from_j);
                }
            }
        }
    }
    for (i, (row, tried)) in path.iter_mut().zip(tried).enumerate() {
        for (k, (cell, tried)) in row.iter_mut().zip(tried).enumerate() {
            if tried.is_some() {
                *cell = *tried;
            } else if !usable(i, k) {
                *cell = None;
            }
        }
    }
    path
}

/// The estimated time of a final frame of `len` bytes whose trial came to `trial` bytes, in
/// units of one byte of a frame that matches nothing: a level-19 frame spends its time on the
/// positions where no long match lets the match finder skip ahead, which the trial's size
/// measures. Fitted on cupy's thrust module (8-10 MB kernels, frames of 1.5-2.6 s): a frame
/// of 10 MB with a 19 KB trial took 1.6 s, one of 10 MB with a 420 KB trial 2.6 s. Only the
/// order of the group's final frames rests on it, never their bytes.
fn final_cost(len: usize, trial: usize) -> usize {
    len.saturating_add(trial.saturating_mul(8))
}

/// Whether `content` may serve as the reference of a kernel of `len` bytes: it does not look
/// like a formatted dictionary, and both fit one frame window.
fn usable_reference(content: &[u8], len: usize) -> bool {
    !content.starts_with(&DICTIONARY_MAGIC)
        && content.len() <= RETAINED_BUDGET
        && content.len() + len <= 1 << MAX_WINDOW_LOG
}

/// A group's trial sizes as the forest search reads them: each kernel's standalone size, and
/// its possible parents (members and the earlier root of its target) cheapest first, ties to
/// the earlier root and then to the lower member. The search asks for a kernel's cheapest
/// allowed parent once per kernel per move it weighs; a list in this order answers at its
/// first or second entry instead of scanning the group (on jax's 27 targets, scanning was
/// 4 % of a pack's instructions).
struct Costs {
    alone: Vec<usize>,
    parents: Vec<Vec<(usize, Parent)>>,
}

impl Costs {
    fn new(trials: &Trials) -> Self {
        let parents = (0..trials.alone.len())
            .map(|i| {
                let earlier = trials.earlier[i].map(|s| (s, Parent::Earlier));
                let members = (trials.pair[i].iter().enumerate())
                    .filter_map(|(j, size)| size.map(|s| (s, Parent::Member(j))));
                let mut parents: Vec<(usize, Parent)> =
                    earlier.into_iter().chain(members).collect();
                // Stable: the earlier root first, then members in order, among equal sizes.
                parents.sort_by_key(|&(size, _)| size);
                parents
            })
            .collect();
        Costs {
            alone: trials.alone.clone(),
            parents,
        }
    }
}

/// A member's cheapest parent given the levels: a root or middle member (only a root for a
/// middle kernel), or the earlier root of its target; with the trial size.
fn best_parent(costs: &Costs, levels: &[Level], i: usize) -> Option<(Parent, usize)> {
    let allowed = |parent: Parent| match (parent, levels[i]) {
        (Parent::Earlier, _) => true,
        (Parent::Member(j), Level::Middle) => levels[j] == Level::Root,
        (Parent::Member(j), _) => levels[j] != Level::Leaf,
    };
    costs.parents[i]
        .iter()
        .find(|&&(_, parent)| allowed(parent))
        .map(|&(size, parent)| (parent, size))
}

/// The group's stored size for `levels` (trial sizes), `None` if a kernel lacks a parent.
fn forest_cost(costs: &Costs, levels: &[Level]) -> Option<usize> {
    let mut total = 0;
    for i in 0..levels.len() {
        total += match levels[i] {
            Level::Root => costs.alone[i],
            _ => best_parent(costs, levels, i)?.1,
        };
    }
    Some(total)
}

/// The forest of depth at most [`MAX_CHAIN`] frames, by local search over each kernel's level
/// from all-standalone: the cheaper of two searches, one taking the move that saves most each
/// round, one taking every saving move as met. Both visit kernels and levels in order and
/// accept strict savings only, so the choice is deterministic.
fn choose_levels(trials: &Trials) -> Vec<Level> {
    let costs = Costs::new(trials);
    let steepest = local_search(&costs, true);
    let first = local_search(&costs, false);
    if first.1 < steepest.1 {
        first.0
    } else {
        steepest.0
    }
}

/// One local search (see `choose_levels`): the levels found and their cost.
fn local_search(costs: &Costs, steepest: bool) -> (Vec<Level>, usize) {
    let n = costs.alone.len();
    let mut levels = vec![Level::Root; n];
    let mut cost = forest_cost(costs, &levels).expect("an all-standalone forest is valid");
    loop {
        let mut best: Option<(usize, Level, usize)> = None;
        'moves: for i in 0..n {
            for level in [Level::Root, Level::Middle, Level::Leaf] {
                if level == levels[i] {
                    continue;
                }
                let previous = std::mem::replace(&mut levels[i], level);
                let saving =
                    forest_cost(costs, &levels).filter(|&c| c < best.map_or(cost, |(_, _, b)| b));
                levels[i] = previous;
                if let Some(c) = saving {
                    best = Some((i, level, c));
                    if !steepest {
                        break 'moves;
                    }
                }
            }
        }
        match best {
            Some((i, level, c)) => {
                levels[i] = level;
                cost = c;
            }
            None => return (levels, cost),
        }
    }
}

/// The kernels of a group coded against one member with the same compression parameters,
/// through one [`PrefixTemplate`] of it: the member's content is loaded once, not once per
/// kernel, for the same frames.
struct TemplatedChildren {
    /// The member coded against.
    parent: usize,
    params: zstd_sys::ZSTD_compressionParameters,
    /// Plan positions, in writing order.
    children: Vec<usize>,
    /// The context estimate of the template and of each copy (they have the same tables).
    estimate: u64,
}

/// The kernels of `plan` worth coding through a template: two or more kernels against one
/// member with the same parameters, at a level whose match finder is a binary tree (the
/// costly load), without long-distance matching (a copied context does not carry its table),
/// on a pool of one thread, where the template and its copy fit [`CONTEXT_BUDGET`]. With
/// more threads the kernels are coded in parallel, each loading its reference: a template
/// shared by two threads needs three contexts at once, which for 8 MB kernels do not fit the
/// gate, and on 2 cores it saved CPU but no time (librocsparse level 19: 333 s before, 338 s
/// with it), while the copies coded on threads of their own raised librocblas's peak from
/// 475 to 503-526 MiB. Which kernels go this way never changes a frame's bytes (see
/// [`prefix_template`]), so it may depend on the thread count.
fn templated_children(
    plan: &[(usize, Option<Parent>)],
    members: &[(&str, &[u8])],
    level: i32,
) -> Vec<TemplatedChildren> {
    if rayon::current_num_threads() > 1 {
        return Vec::new();
    }
    let mut groups: Vec<TemplatedChildren> = Vec::new();
    for (p, &(member, reference)) in plan.iter().enumerate() {
        let Some(Parent::Member(parent)) = reference else {
            continue;
        };
        let (len, prefix_len) = (members[member].1.len(), members[parent].1.len());
        if len == 0 || long_distance_matching(level, len, prefix_len) {
            continue;
        }
        let window_log = prefixed_window_log(len + prefix_len);
        let params = prefix_template::parameters(level, len, prefix_len, window_log);
        if !prefix_template::uses_tree(&params) {
            continue;
        }
        let estimate = context_estimate(Search::Level(level), len, prefix_len);
        let same = |g: &TemplatedChildren| {
            g.parent == parent && prefix_template::same_parameters(&g.params, &params)
        };
        match groups.iter_mut().find(|g| same(g)) {
            Some(g) => {
                g.children.push(p);
                g.estimate = g.estimate.max(estimate);
            }
            None => groups.push(TemplatedChildren {
                parent,
                params,
                children: vec![p],
                estimate,
            }),
        }
    }
    groups.retain(|g| g.children.len() >= 2 && 2 * g.estimate <= CONTEXT_BUDGET);
    groups
}

impl TemplatedChildren {
    /// The children's frames, by plan position: the template loaded once, then one copy of
    /// it per kernel, one after the other on this thread (the pool has one). The template and
    /// the copy are reserved together, before either is made; their contexts come from
    /// `templates` and go back there.
    fn code(
        &self,
        plan: &[(usize, Option<Parent>)],
        members: &[(&str, &[u8])],
        templates: &TemplatePool,
    ) -> Result<Vec<(usize, Vec<u8>)>, ArchiveError> {
        let _contexts = CONTEXTS.reserve(2 * self.estimate);
        let mut template =
            PrefixTemplate::new(templates.take()?, members[self.parent].1, self.params)
                .map_err(zstd_failure)?;
        let frames = self
            .children
            .iter()
            .map(|&p| {
                let data = members[plan[p].0].1;
                let frame = template.compress(data).map_err(zstd_failure)?;
                Ok((p, within_frame_size(frame)?))
            })
            .collect::<Result<_, ArchiveError>>()?;
        templates.put_back(template.into_contexts());
        Ok(frames)
    }
}

#[cfg(test)]
mod tests {
    use zstd::zstd_safe;

    use super::contexts::{context, frame, trial_search};
    use super::*;
    use crate::prefix_template::TemplateContexts;

    fn trials(alone: &[usize], pair: &[&[Option<usize>]], earlier: &[Option<usize>]) -> Trials {
        Trials {
            alone: alone.to_vec(),
            pair: pair.iter().map(|row| row.to_vec()).collect(),
            earlier: earlier.to_vec(),
        }
    }

    #[test]
    fn a_chain_through_a_middle_kernel_beats_two_deltas_against_one_root() {
        // 1 is close to 0, 2 close to 1 but far from 0: 0 <- 1 <- 2 (100 + 10 + 5).
        let t = trials(
            &[100, 100, 100],
            &[
                &[None, Some(60), Some(70)],
                &[Some(10), None, Some(40)],
                &[Some(50), Some(5), None],
            ],
            &[None, None, None],
        );
        assert_eq!(choose_levels(&t), [Level::Root, Level::Middle, Level::Leaf]);
        assert_eq!(forest_cost(&Costs::new(&t), &choose_levels(&t)), Some(115));
    }

    #[test]
    fn an_earlier_root_of_the_same_target_can_serve_a_lone_kernel() {
        let t = trials(&[100], &[&[None]], &[Some(30)]);
        assert_eq!(choose_levels(&t), [Level::Middle]);
        let t = trials(&[100], &[&[None]], &[Some(120)]);
        assert_eq!(choose_levels(&t), [Level::Root]);
    }

    /// Real contexts, as [`compress`] makes them, against the estimate the gate reserves: never
    /// above it, and at level 19 (the default) not far below it either.
    /// A kernel coded through a template of its reference is the frame a prefix compression
    /// makes, byte for byte, at the levels of the three tree strategies: the fixtures' code objects of
    /// one kernel for six targets, each against each, through one template per reference and
    /// set of parameters (kernels of different sizes through one template included), the
    /// templates made in the contexts of earlier ones (other references, other levels) where
    /// there are any.
    #[test]
    fn templated_frames_are_the_bytes_of_a_prefix_compression() {
        let kernels = fixture_kernels();
        let (mut shared, mut reused) = (0, 0);
        let mut spare: Vec<TemplateContexts> = Vec::new();
        for level in [13, 17, 19] {
            for (r, reference) in kernels.iter().enumerate() {
                let mut templates: Vec<(zstd_sys::ZSTD_compressionParameters, PrefixTemplate)> =
                    Vec::new();
                for (k, kernel) in kernels.iter().enumerate().filter(|&(k, _)| k != r) {
                    let total = kernel.len() + reference.len();
                    let params = prefix_template::parameters(
                        level,
                        kernel.len(),
                        reference.len(),
                        prefixed_window_log(total),
                    );
                    assert!(prefix_template::uses_tree(&params), "level {level}");
                    let t = match templates
                        .iter()
                        .position(|(p, _)| prefix_template::same_parameters(p, &params))
                    {
                        Some(t) => {
                            shared += 1;
                            t
                        }
                        None => {
                            let contexts = match spare.pop() {
                                Some(contexts) => {
                                    reused += 1;
                                    contexts
                                }
                                None => TemplateContexts::new().unwrap(),
                            };
                            let template = PrefixTemplate::new(contexts, reference, params);
                            templates.push((params, template.unwrap()));
                            templates.len() - 1
                        }
                    };
                    assert_eq!(
                        templates[t].1.compress(kernel).unwrap(),
                        compress(&Contexts::default(), kernel, Some(reference), level).unwrap(),
                        "level {level}: kernel {k} against {r}"
                    );
                }
                spare.extend(templates.into_iter().map(|(_, t)| t.into_contexts()));
            }
        }
        assert!(shared > 20, "only {shared} kernels shared a template");
        assert!(reused > 20, "only {reused} templates reused contexts");
    }

    /// The fixtures' code objects of one kernel for gfx900, gfx906, gfx908, gfx90a:xnack+ and
    /// gfx1030, and another library's gfx90a kernel.
    fn fixture_kernels() -> Vec<Vec<u8>> {
        [
            "shards/shard-a/demo_lib_gfx90X/demo/stage/lib/rocblas/library/Kernels.so-000-gfx900.hsaco",
            "shards/shard-a/demo_lib_gfx90X/demo/stage/lib/rocblas/library/Kernels.so-000-gfx906.hsaco",
            "shards/shard-b/demo_lib_gfx90a/demo/stage/lib/rocblas/library/Kernels.so-000-gfx908.hsaco",
            "shards/shard-b/demo_lib_gfx90a/demo/stage/lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco",
            "shards/shard-c/demo_lib_gfx103X/demo/stage/lib/rocblas/library/Kernels.so-000-gfx1030.hsaco",
            "offload/mk_gfx90a_xnackp.co",
        ]
        .iter()
        .map(|rel| std::fs::read(kpack_testkit::fixture(rel)).unwrap())
        .collect()
    }

    /// A context kept by [`Contexts`] after trials, wide trials and frames of other sizes and
    /// levels codes the same bytes as a new one, so that which context a compression gets (it
    /// depends on the thread timing) never shows in the archive.
    #[test]
    fn a_reused_context_codes_the_same_bytes_as_a_new_one() {
        let kernels = fixture_kernels();
        let wide = vec![0x5au8; 9 << 20];
        let contexts = Contexts::default();
        for (k, kernel) in kernels.iter().enumerate() {
            let reference = &kernels[(k + 1) % kernels.len()];
            // Whatever came before in the kept contexts: a wide trial, a trial, other frames.
            frame(&contexts, kernel, Some(&wide), Search::WideTrial).unwrap();
            trial(&contexts, kernel, Some(reference)).unwrap();
            for level in [19, 3] {
                let against = compress(&contexts, kernel, Some(reference), level).unwrap();
                assert_eq!(
                    against,
                    compress(&Contexts::default(), kernel, Some(reference), level).unwrap(),
                    "kernel {k} at level {level} against a reference"
                );
                let alone = compress(&contexts, kernel, None, level).unwrap();
                assert_eq!(
                    alone,
                    compress(&Contexts::default(), kernel, None, level).unwrap(),
                    "kernel {k} at level {level} alone"
                );
            }
        }
        assert!(
            !contexts.is_empty(),
            "the contexts of 64 KB kernels are kept"
        );
    }

    /// A standalone frame at a level of zstd's `btultra2` is coded with `btultra`, without the
    /// statistics pass, and comes within 1 % of zstd's own level-19 frame of the same bytes
    /// (both with the content size and checksum the archive records).
    #[test]
    fn a_standalone_frame_skips_btultra2s_statistics_pass_within_1_percent_of_its_size() {
        for kernel in fixture_kernels() {
            assert!(prefix_template::standalone_is_btultra2(19, kernel.len()));
            assert!(!prefix_template::standalone_is_btultra2(12, kernel.len()));
            let ours = compress(&Contexts::default(), &kernel, None, 19).unwrap();
            let mut cctx = zstd_safe::CCtx::create();
            cctx.set_parameter(zstd_safe::CParameter::CompressionLevel(19))
                .unwrap();
            cctx.set_parameter(zstd_safe::CParameter::ChecksumFlag(true))
                .unwrap();
            let mut zstds = Vec::with_capacity(zstd_safe::compress_bound(kernel.len()));
            cctx.compress2(&mut zstds, &kernel).unwrap();
            assert_ne!(ours, zstds, "a btultra2 frame");
            assert!(
                ours.len() * 100 <= zstds.len() * 101,
                "{} bytes against zstd's {}",
                ours.len(),
                zstds.len()
            );
            assert_eq!(zstd::bulk::decompress(&ours, kernel.len()).unwrap(), kernel);
        }
    }

    /// A kernel's trial against a reference is the same size whether the reference is loaded
    /// for it alone ([`trial`]) or once for the kernels that share its parameters
    /// ([`trials_against`], through a template), so that the forest, and the archive, do not
    /// depend on which: the fixtures' six code objects, and six larger kernels made of them
    /// (about 300 KB each, whose trials share templates), each against each of its size, in
    /// contexts kept from template to template.
    #[test]
    fn a_trial_through_a_shared_reference_is_the_size_of_a_trial_of_its_own() {
        let small = fixture_kernels();
        // Kernel `k`: the fixtures' code objects from the `k`th on, each followed by the
        // number of its copy, up to 300 KB.
        let large: Vec<Vec<u8>> = (0..small.len())
            .map(|k| {
                let mut kernel = Vec::new();
                for copy in 0u64.. {
                    if kernel.len() >= 300_000 {
                        break;
                    }
                    kernel.extend_from_slice(&small[(k + copy as usize) % small.len()]);
                    kernel.extend_from_slice(&copy.to_le_bytes());
                }
                kernel
            })
            .collect();
        for kernels in [&small, &large] {
            let (contexts, templates) = (Contexts::default(), TemplatePool::default());
            for (r, reference) in kernels.iter().enumerate() {
                let others: Vec<&[u8]> = (kernels.iter().enumerate())
                    .filter(|&(k, _)| k != r)
                    .map(|(_, kernel)| &kernel[..])
                    .collect();
                let sizes = trials_against(&contexts, &templates, &others, reference).unwrap();
                for (kernel, size) in others.iter().zip(sizes) {
                    let own = trial(&Contexts::default(), kernel, Some(reference)).unwrap();
                    assert_eq!(size, own, "a kernel of {} bytes against {r}", kernel.len());
                }
            }
            // Templates were made (their contexts kept) for the large kernels only.
            assert_eq!(templates.is_empty(), kernels == &small);
        }
    }

    /// The trials (level 4's `dfast`) find what the final frames do: a kernel's sibling target
    /// is its smallest trial, far below the kernel alone, and below another target's and
    /// another library's kernel.
    #[test]
    fn a_trial_ranks_a_kernel_s_sibling_target_first() {
        let kernels = fixture_kernels();
        let (gfx900, gfx906, gfx1030, other) = (&kernels[0], &kernels[1], &kernels[4], &kernels[5]);
        let contexts = Contexts::default();
        let size = |prefix| trial(&contexts, gfx900, prefix).unwrap();
        let (alone, sibling) = (size(None), size(Some(gfx906)));
        assert!(sibling * 4 < alone, "{sibling} against {alone} alone");
        assert!(sibling < size(Some(gfx1030)));
        assert!(sibling < size(Some(other)));
    }

    #[test]
    fn context_estimates_bound_the_real_contexts() {
        let bytes = |n: usize, seed: usize| -> Vec<u8> {
            (0..n)
                .map(|i| (((i ^ seed).wrapping_mul(2654435761)) >> 13) as u8 & 0x3f)
                .collect()
        };
        for (search, len, prefix_len) in [
            (Search::Level(19), 100_000, 0),
            (Search::Level(19), 1 << 20, 0),
            (Search::Level(19), 1 << 20, 1 << 20),
            (Search::Level(19), 8 << 20, 0),
            (Search::Level(19), 6 << 20, 6 << 20),
            (Search::Level(19), 20 << 20, 20 << 20),
            (Search::Level(4), 6 << 20, 6 << 20),
            (Search::Level(3), 1 << 20, 0),
            (Search::Level(22), 2 << 20, 2 << 20),
            (trial_search(6 << 20, 6 << 20), 6 << 20, 6 << 20),
            (trial_search(1 << 20, 40 << 20), 1 << 20, 40 << 20),
            (trial_search(8 << 20, 100_000), 8 << 20, 100_000),
        ] {
            let data = bytes(len, 1);
            let prefix = bytes(prefix_len, 2);
            let mut cctx = context(len, (prefix_len > 0).then_some(&prefix[..]), search).unwrap();
            let mut frame = Vec::with_capacity(zstd_safe::compress_bound(len));
            cctx.compress2(&mut frame, &data).unwrap();
            let real = cctx.sizeof() as u64;
            let estimate = context_estimate(search, len, prefix_len);
            // A template of the prefix holds the same tables.
            if let (Search::Level(level), true) = (search, prefix_len > 0) {
                let params = prefix_template::parameters(
                    level,
                    len,
                    prefix_len,
                    prefixed_window_log(len + prefix_len),
                );
                let template =
                    PrefixTemplate::new(TemplateContexts::new().unwrap(), &prefix, params).unwrap();
                assert!(
                    template.sizeof() as u64 <= estimate,
                    "{search:?}, {len} + {prefix_len} bytes: template {} > estimate {estimate}",
                    template.sizeof()
                );
            }
            assert!(
                real <= estimate,
                "{search:?}, {len} + {prefix_len} bytes: context {real} > estimate {estimate}"
            );
            if matches!(search, Search::Level(19)) && len >= 1 << 20 {
                assert!(
                    estimate <= real + real / 4,
                    "{search:?}, {len} + {prefix_len} bytes: estimate {estimate} far above {real}"
                );
            }
        }
    }

    #[test]
    fn a_pair_not_tried_is_estimated_through_the_cheapest_chain_of_tried_pairs() {
        // 0 was tried against 1 (10) only, 1 against 2 (5), 2 against 3 (7): 0 against 2 is
        // estimated at 15 and against 3 at 22; 3 reaches nothing, and an unusable pair stays
        // without a size.
        let tried = [
            vec![None, Some(10), None, None],
            vec![None, None, Some(5), None],
            vec![None, None, None, Some(7)],
            vec![None, None, None, None],
        ];
        let path = through_tried_paths(&tried, |i, k| (i, k) != (1, 3));
        assert_eq!(path[0], [None, Some(10), Some(15), Some(22)]);
        assert_eq!(path[1], [None, None, Some(5), None]);
        assert_eq!(path[3], [None; 4]);
    }

    #[test]
    fn kernels_without_a_useful_reference_stay_standalone() {
        let t = trials(
            &[100, 80],
            &[&[None, Some(100)], &[Some(90), None]],
            &[None, None],
        );
        assert_eq!(choose_levels(&t), [Level::Root, Level::Root]);
    }
}
