//! The dependency graph and readiness by `bd ready` rules, maintained incrementally.
//!
//! A bead is *ready* when it exists, its status is `open`, it is not held back, its issue type
//! is not `molecule`, `gate` or `message`, and its `defer_until` (checked when asked, since time
//! passes without events) has passed. It is *held back* when a `blocks` or `conditional-blocks`
//! dependency points at a bead that exists and is not *done*, when its own status is `blocked`,
//! or when a `parent-child` parent is held back (transitively).
//!
//! *Done* is stricter than `bd ready`'s closed, because a bead submitted `--after` another must
//! not run without that one's work: a bead is done when it is closed, was not cancelled, and
//! every step of its molecule is closed (so its merge step merged). A cancelled bead, or one a
//! person closed halfway through its molecule, keeps its dependents waiting until someone
//! decides (reopens it, or drops the dependency). A closed bead that was never poured, as a
//! closed issue read from beads, is done.
//!
//! A dependency on a bead the store does not know does not hold anything back, as in
//! `bd ready`; when that bead arrives its dependents are re-evaluated. A dependency on another
//! project's issue (`external:…`) is no edge at all: nothing here could ever tell that it is
//! done.
//!
//! Each node keeps three counters (open blockers, held-back parents, open steps) and the three
//! flags it last published to its neighbours. A change re-evaluates one node and walks outward
//! only while flags flip, so a status change costs work proportional to its dependents,
//! descendants and parents, never to the size of the store.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::domain::id::BeadId;
use crate::domain::model::{Bead, DepType, Status, NEVER_READY_TYPES};
use crate::domain::time::Timestamp;

/// Index of a node in [`Graph::nodes`].
pub(crate) type Slot = u32;

/// Ready work beads in dispatch order: priority (0 first), then age, then id.
type ReadyKey = (u8, Timestamp, BeadId);

#[derive(Debug)]
pub(crate) struct Node {
    /// `None` while the bead is only known as the target of someone's dependency.
    pub(crate) bead: Option<Bead>,
    blockers: Vec<Slot>,
    dependents: Vec<Slot>,
    parents: Vec<Slot>,
    pub(crate) children: Vec<Slot>,
    open_blockers: u32,
    held_parents: u32,
    /// Step children (the steps of this bead's molecule) that are not closed.
    open_steps: u32,
    /// Published: this bead exists and is not done, so it holds back its dependents.
    is_open_blocker: bool,
    /// Published: this bead is a step that is not closed, counted in its parents' `open_steps`.
    is_open_step: bool,
    /// Published: this bead is held back, and so are its children.
    held: bool,
    ready_key: Option<ReadyKey>,
    /// This node's entry in [`Graph::deferred`], if any.
    deferred_key: Option<Timestamp>,
}

impl Node {
    fn new() -> Node {
        Node {
            bead: None,
            blockers: Vec::new(),
            dependents: Vec::new(),
            parents: Vec::new(),
            children: Vec::new(),
            open_blockers: 0,
            held_parents: 0,
            open_steps: 0,
            is_open_blocker: false,
            is_open_step: false,
            held: false,
            ready_key: None,
            deferred_key: None,
        }
    }

    /// The flags this node should publish given its bead and counters.
    fn wanted(&self) -> Wanted {
        let Some(bead) = &self.bead else {
            return Wanted::default();
        };
        let closed = bead.status.is_closed();
        let held = !closed
            && (self.open_blockers > 0 || self.held_parents > 0 || bead.status == Status::Blocked);
        let is_step = bead.is_step();
        let ready = bead.status == Status::Open
            && !held
            && !is_step
            && !NEVER_READY_TYPES.contains(&bead.issue_type.as_str());
        Wanted {
            open_blocker: !self.is_done(),
            held,
            key: ready.then(|| (bead.priority, bead.created_at, bead.id.clone())),
            open_step: is_step && !closed,
        }
    }

    /// Closed, not cancelled, and no step of its molecule left open (see the module docs).
    fn is_done(&self) -> bool {
        self.bead
            .as_ref()
            .is_some_and(|b| b.status.is_closed() && !b.is_cancelled() && self.open_steps == 0)
    }
}

/// What a node publishes: see the fields of [`Node`].
#[derive(Default)]
struct Wanted {
    open_blocker: bool,
    held: bool,
    key: Option<ReadyKey>,
    open_step: bool,
}

/// Beads, their edges, and the ready set.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    pub(crate) nodes: Vec<Node>,
    slots: HashMap<BeadId, Slot>,
    ready: BTreeSet<ReadyKey>,
    /// How many ready beads have each `defer_until`.
    deferred: BTreeMap<Timestamp, u32>,
    /// The slots of the nodes that hold a bead, in the order the beads arrived: a bead named
    /// by someone's dependency first takes an earlier slot as a placeholder.
    order: Vec<Slot>,
    /// The beads whose id has an upper-case letter, by the id in lower case: ids that differ
    /// only in case are refused (see [`Graph::case_twin`]).
    folded: HashMap<Box<str>, BeadId>,
}

impl Graph {
    /// Room for `n` more beads, allocated once instead of by doubling.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.nodes.reserve_exact(n);
        self.order.reserve_exact(n);
        self.slots.reserve(n);
    }

    pub(crate) fn slot(&self, id: &str) -> Option<Slot> {
        self.slots.get(id).copied()
    }

    pub(crate) fn bead(&self, id: &str) -> Option<&Bead> {
        self.node(self.slot(id)?).bead.as_ref()
    }

    /// Number of beads (not placeholders).
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Every bead, in the order they arrived.
    pub(crate) fn beads(&self) -> impl Iterator<Item = &Bead> + '_ {
        self.order
            .iter()
            .filter_map(|slot| self.node(*slot).bead.as_ref())
    }

    /// A bead whose id differs from `id` only in case. On a case-insensitive file system the two
    /// would share a worktree, a run folder and a branch.
    pub(crate) fn case_twin(&self, id: &str) -> Option<&BeadId> {
        if !id.bytes().any(|b| b.is_ascii_uppercase()) {
            // Every id kept in `folded` has an upper-case letter, so it is not `id` itself.
            return self.folded.get(id);
        }
        let lower = id.to_ascii_lowercase();
        if let Some(twin) = self.folded.get(lower.as_str()).filter(|t| t.as_str() != id) {
            return Some(twin);
        }
        self.bead(&lower).map(|b| &b.id)
    }

    pub(crate) fn node(&self, slot: Slot) -> &Node {
        &self.nodes[slot as usize]
    }

    fn node_mut(&mut self, slot: Slot) -> &mut Node {
        &mut self.nodes[slot as usize]
    }

    /// The slot for `id`, adding a placeholder node when the id is new.
    fn slot_or_insert(&mut self, id: &BeadId) -> Slot {
        if let Some(s) = self.slots.get(id) {
            return *s;
        }
        let slot = Slot::try_from(self.nodes.len()).expect("fewer than 2^32 beads");
        self.nodes.push(Node::new());
        self.slots.insert(id.clone(), slot);
        slot
    }

    /// Adds a bead (new, or filling a placeholder) with its dependency edges, then re-evaluates
    /// what it touches. With `propagate` false the counters are left for [`Graph::recompute`],
    /// which bulk loading calls once at the end.
    pub(crate) fn insert(&mut self, bead: Bead, propagate: bool) -> Slot {
        let slot = self.slot_or_insert(&bead.id);
        // An external dependency is no node: nothing here can tell when it is done.
        let deps: Vec<(BeadId, DepType)> = bead
            .dependencies
            .iter()
            .filter_map(|d| Some((d.depends_on_id.bead()?.clone(), d.dep_type.clone())))
            .collect();
        if bead.id.as_str().bytes().any(|b| b.is_ascii_uppercase()) {
            let folded = bead.id.as_str().to_ascii_lowercase().into_boxed_str();
            self.folded.insert(folded, bead.id.clone());
        }
        self.node_mut(slot).bead = Some(bead);
        self.order.push(slot);
        for (target, dep_type) in deps {
            self.add_edge(slot, &target, &dep_type, propagate);
        }
        if propagate {
            self.refresh(slot);
        }
        slot
    }

    /// Records that the bead in `from` depends on `target`. Counters are adjusted for the
    /// target's published flags; the caller refreshes `from`.
    pub(crate) fn add_edge(
        &mut self,
        from: Slot,
        target: &BeadId,
        dep_type: &DepType,
        count: bool,
    ) {
        let to = self.slot_or_insert(target);
        if dep_type.is_blocking() {
            if self.node(from).blockers.contains(&to) {
                return;
            }
            self.node_mut(from).blockers.push(to);
            self.node_mut(to).dependents.push(from);
            if count && self.node(to).is_open_blocker {
                self.node_mut(from).open_blockers += 1;
            }
        } else if *dep_type == DepType::ParentChild {
            if self.node(from).parents.contains(&to) {
                return;
            }
            self.node_mut(from).parents.push(to);
            self.node_mut(to).children.push(from);
            if count && self.node(to).held {
                self.node_mut(from).held_parents += 1;
            }
            if count && self.node(from).is_open_step {
                // Only an edge added to a bead already in place gets here.
                self.node_mut(to).open_steps += 1;
                self.refresh(to);
            }
        }
    }

    /// Removes the blocking edge from the bead in `from` to `target`, if there is one. Counters
    /// are adjusted; the caller refreshes `from`.
    pub(crate) fn remove_blocker(&mut self, from: Slot, target: &BeadId) {
        let Some(to) = self.slot(target.as_str()) else {
            return;
        };
        let Some(at) = self.node(from).blockers.iter().position(|b| *b == to) else {
            return;
        };
        self.node_mut(from).blockers.swap_remove(at);
        self.node_mut(to).dependents.retain(|d| *d != from);
        if self.node(to).is_open_blocker {
            self.node_mut(from).open_blockers -= 1;
        }
    }

    /// Changes a bead in place and re-evaluates readiness around it.
    pub(crate) fn update(&mut self, slot: Slot, change: impl FnOnce(&mut Bead)) {
        if let Some(bead) = self.node_mut(slot).bead.as_mut() {
            change(bead);
        }
        self.refresh(slot);
    }

    /// Re-evaluates `start` and, while published flags flip, the nodes they feed.
    pub(crate) fn refresh(&mut self, start: Slot) {
        let mut work = vec![start];
        while let Some(slot) = work.pop() {
            let Wanted {
                open_blocker,
                held,
                key,
                open_step,
            } = self.node(slot).wanted();
            let node = self.node_mut(slot);
            let blocker_flip = node.is_open_blocker != open_blocker;
            let held_flip = node.held != held;
            let step_flip = node.is_open_step != open_step;
            node.is_open_blocker = open_blocker;
            node.held = held;
            node.is_open_step = open_step;
            let old_key = std::mem::replace(&mut node.ready_key, key.clone());
            if old_key != key {
                if let Some(k) = old_key {
                    self.ready.remove(&k);
                }
                if let Some(k) = key {
                    self.ready.insert(k);
                }
            }
            self.track_defer(slot);
            if blocker_flip {
                for i in 0..self.node(slot).dependents.len() {
                    let d = self.node(slot).dependents[i];
                    let n = self.node_mut(d);
                    if open_blocker {
                        n.open_blockers += 1;
                    } else {
                        n.open_blockers -= 1;
                    }
                    work.push(d);
                }
            }
            if step_flip {
                for i in 0..self.node(slot).parents.len() {
                    let p = self.node(slot).parents[i];
                    let n = self.node_mut(p);
                    if open_step {
                        n.open_steps += 1;
                    } else {
                        n.open_steps -= 1;
                    }
                    work.push(p);
                }
            }
            if held_flip {
                for i in 0..self.node(slot).children.len() {
                    let c = self.node(slot).children[i];
                    let n = self.node_mut(c);
                    if held {
                        n.held_parents += 1;
                    } else {
                        n.held_parents -= 1;
                    }
                    work.push(c);
                }
            }
        }
    }

    /// Recomputes every counter, flag and the ready set from the beads and edges alone.
    /// O(beads + edges); used after bulk loading and to verify the incremental path.
    pub(crate) fn recompute(&mut self) {
        self.ready.clear();
        for node in &mut self.nodes {
            node.is_open_step = node
                .bead
                .as_ref()
                .is_some_and(|b| b.is_step() && !b.status.is_closed());
            node.open_steps = 0;
            node.open_blockers = 0;
            node.held_parents = 0;
            node.held = false;
            node.ready_key = None;
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].is_open_step {
                for k in 0..self.nodes[i].parents.len() {
                    let p = self.nodes[i].parents[k] as usize;
                    self.nodes[p].open_steps += 1;
                }
            }
        }
        for node in &mut self.nodes {
            node.is_open_blocker = node.bead.is_some() && !node.is_done();
        }
        for i in 0..self.nodes.len() {
            let open = self.nodes[i]
                .blockers
                .iter()
                .filter(|b| self.nodes[**b as usize].is_open_blocker)
                .count();
            self.nodes[i].open_blockers = open as u32;
        }
        // Held-back-ness flows down parent-child edges: seed with the nodes held on their own
        // account, then walk their descendants.
        let mut work: Vec<Slot> = Vec::new();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            if let Some(bead) = &node.bead {
                if !bead.status.is_closed()
                    && (node.open_blockers > 0 || bead.status == Status::Blocked)
                {
                    node.held = true;
                    work.push(i as Slot);
                }
            }
        }
        while let Some(slot) = work.pop() {
            for i in 0..self.node(slot).children.len() {
                let c = self.node(slot).children[i];
                let child = self.node_mut(c);
                child.held_parents += 1;
                let can_hold = child.bead.as_ref().is_some_and(|b| !b.status.is_closed());
                if !child.held && can_hold {
                    child.held = true;
                    work.push(c);
                }
            }
        }
        self.deferred.clear();
        for i in 0..self.nodes.len() {
            let key = self.nodes[i].wanted().key;
            if let Some(k) = &key {
                self.ready.insert(k.clone());
            }
            self.nodes[i].ready_key = key;
            self.track_defer(i as Slot);
        }
    }

    /// Keeps `deferred` in step with the node's readiness and `defer_until`.
    fn track_defer(&mut self, slot: Slot) {
        let node = &mut self.nodes[slot as usize];
        let want = match (&node.ready_key, &node.bead) {
            (Some(_), Some(b)) => b.defer_until,
            _ => None,
        };
        if node.deferred_key != want {
            if let Some(old) = node.deferred_key.take() {
                if let Some(n) = self.deferred.get_mut(&old) {
                    *n -= 1;
                    if *n == 0 {
                        self.deferred.remove(&old);
                    }
                }
            }
            if let Some(new) = want {
                *self.deferred.entry(new).or_insert(0) += 1;
            }
            node.deferred_key = want;
        }
    }

    /// Ready work beads in dispatch order whose `defer_until` is not after `now`.
    pub(crate) fn ready(&self, now: Timestamp) -> impl Iterator<Item = &Bead> + '_ {
        self.ready
            .iter()
            .filter_map(|(_, _, id)| self.bead(id.as_str()))
            .filter(move |b| b.defer_until.is_none_or(|t| t <= now))
    }

    /// Whether the bead in `slot` is among those [`Graph::ready`] gives at `now`.
    pub(crate) fn is_ready(&self, slot: Slot, now: Timestamp) -> bool {
        let node = self.node(slot);
        node.ready_key.is_some()
            && node
                .bead
                .as_ref()
                .is_some_and(|b| b.defer_until.is_none_or(|t| t <= now))
    }

    /// How many beads [`Graph::ready`] gives at `now`, counted without looking at them: the
    /// statically ready ones less those deferred past `now`.
    pub(crate) fn ready_count(&self, now: Timestamp) -> usize {
        use std::ops::Bound;
        let later: usize = self
            .deferred
            .range((Bound::Excluded(now), Bound::Unbounded))
            .map(|(_, n)| *n as usize)
            .sum();
        self.ready.len().saturating_sub(later)
    }

    /// The earliest `defer_until` after `now` among statically ready beads.
    pub(crate) fn deferred_after(&self, now: Timestamp) -> Option<Timestamp> {
        use std::ops::Bound;
        self.deferred
            .range((Bound::Excluded(now), Bound::Unbounded))
            .next()
            .map(|(t, _)| *t)
    }

    /// Whether the bead in `slot` is held back (see the module docs).
    pub(crate) fn is_held(&self, slot: Slot) -> bool {
        self.node(slot).held
    }

    /// Whether the bead in `slot` holds back its dependents: it exists and is not done.
    pub(crate) fn holds_dependents(&self, slot: Slot) -> bool {
        self.node(slot).is_open_blocker
    }

    /// Counters and flags of every node, for comparing the incremental path with a recompute.
    #[cfg(test)]
    pub(crate) fn fingerprint(&self) -> Vec<Fingerprint> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| Fingerprint {
                slot: i,
                counters: (n.open_blockers, n.held_parents, n.open_steps),
                flags: (n.is_open_blocker, n.held, n.is_open_step),
                ready: n.ready_key.is_some(),
            })
            .collect()
    }
}

/// A node's counters and flags, for comparing the incremental path with a recompute.
#[cfg(test)]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    slot: usize,
    counters: (u32, u32, u32),
    flags: (bool, bool, bool),
    ready: bool,
}
