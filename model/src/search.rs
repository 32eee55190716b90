//! The breadth-first search both models run: every reachable state once,
//! stopping at the first violation, whose trace is then a shortest one.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::Write as _;
use std::time::Instant;

/// A protocol as a transition system.
pub trait Model {
    /// A state of every node, client and message.
    type State: Clone;
    /// What identifies a state for the search (states with one key are
    /// explored once: the state itself, or a form without names).
    type Key: Hash + Eq;
    /// One step.
    type Action: Copy + fmt::Display;
    /// A property broken.
    type Violation: fmt::Debug;

    /// Where every run starts.
    fn initial(&self) -> Self::State;
    /// Every step possible from `state`.
    fn actions(&self, state: &Self::State) -> Vec<Self::Action>;
    /// The state after `action`, or the property it breaks.
    fn apply(
        &self,
        state: &Self::State,
        action: Self::Action,
    ) -> Result<Self::State, Self::Violation>;
    /// What identifies `state`.
    fn key(&self, state: &Self::State) -> Self::Key;
}

/// What a search found.
pub struct Outcome<M: Model> {
    /// Distinct states explored.
    pub states: usize,
    /// The first violation found and the steps that lead to it.
    pub counterexample: Option<(M::Violation, Vec<M::Action>)>,
}

/// FxHash: the keys are short, and SipHash would dominate the run time.
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
}

/// Breadth-first search over every reachable state.
///
/// # Panics
///
/// Past `2^32` states.
pub fn explore<M: Model>(model: &M) -> Outcome<M> {
    let start = model.initial();
    // For each state: its parent's index and the action that led to it.
    let mut parents: Vec<(u32, Option<M::Action>)> = vec![(0, None)];
    let mut seen: HashMap<M::Key, (), BuildHasherDefault<Fx>> = HashMap::default();
    seen.insert(model.key(&start), ());
    let mut queue = VecDeque::from([(start, 0u32)]);
    while let Some((state, index)) = queue.pop_front() {
        for action in model.actions(&state) {
            match model.apply(&state, action) {
                Ok(next) => {
                    let key = model.key(&next);
                    if seen.contains_key(&key) {
                        continue;
                    }
                    let i = u32::try_from(parents.len()).expect("fewer than 2^32 states");
                    parents.push((index, Some(action)));
                    seen.insert(key, ());
                    queue.push_back((next, i));
                }
                Err(violation) => {
                    let mut trace = vec![action];
                    let mut at = index;
                    while let (parent, Some(a)) = parents[at as usize] {
                        trace.push(a);
                        at = parent;
                    }
                    trace.reverse();
                    return Outcome {
                        states: seen.len(),
                        counterexample: Some((violation, trace)),
                    };
                }
            }
        }
    }
    Outcome {
        states: seen.len(),
        counterexample: None,
    }
}

/// Prints a line past the test harness's capture.
pub fn report(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Runs one configuration and prints its figures.
pub fn run<M: Model>(name: &str, model: &M) -> Outcome<M> {
    let t = Instant::now();
    let outcome = explore(model);
    report(&format!(
        "model {name}: {} states explored in {:.2?}, {}",
        outcome.states,
        t.elapsed(),
        match &outcome.counterexample {
            None => "no violation".to_owned(),
            Some((v, trace)) => format!("counterexample {v:?} in {} steps", trace.len()),
        }
    ));
    outcome
}

fn print_trace<M: Model>(model: &M, trace: &[M::Action]) {
    let mut state = model.initial();
    for (i, action) in trace.iter().enumerate() {
        report(&format!("  {:2}. {action}", i + 1));
        match model.apply(&state, *action) {
            Ok(next) => state = next,
            Err(v) => report(&format!("      -> {v:?}")),
        }
    }
}

/// Asserts that no reachable state breaks a property.
///
/// # Panics
///
/// With the counterexample's trace printed, when one is found.
pub fn assert_safe<M: Model>(name: &str, model: &M) -> usize {
    let outcome = run(name, model);
    if let Some((violation, trace)) = &outcome.counterexample {
        print_trace(model, trace);
        panic!("{name}: {violation:?}");
    }
    outcome.states
}

/// A negative control: asserts that the search finds a violation that
/// `expect` accepts, within `steps` steps, and prints its trace.
///
/// # Panics
///
/// When it finds none, another one, or only a longer one.
pub fn assert_found<M: Model>(
    name: &str,
    model: &M,
    steps: usize,
    expect: impl Fn(&M::Violation) -> bool,
) {
    let outcome = run(name, model);
    let Some((violation, trace)) = outcome.counterexample else {
        panic!("{name}: the negative control found no counterexample");
    };
    print_trace(model, &trace);
    assert!(expect(&violation), "{name}: unexpected {violation:?}");
    assert!(
        trace.len() <= steps,
        "{name}: {} steps, more than {steps}",
        trace.len()
    );
}
