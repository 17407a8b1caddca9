//! The loader under mutated input: every file in `scenarios/` (scenarios and their shared parts),
//! changed byte by byte and with YAML that is hard to read (tags, anchors, aliases, huge numbers,
//! durations that overflow, bytes that are not UTF-8), loads or is refused with a message, and
//! never panics, hangs or grows without bound.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use rackproof_harness::load::{LoadError, load_bytes};

/// Longer than any load takes in a debug build; a load that takes it is a hang.
const HANG: Duration = Duration::from_secs(20);

/// Pieces of YAML that stress the reader and the model, inserted at random places.
const TOKENS: &[&str] = &[
    "!frobnicate ",
    "!include ",
    "!include common/pool.yaml",
    "!include missing.yaml",
    "!include fuzz.yaml",
    "!!binary ",
    "&a ",
    "*a",
    "*unknown",
    "<<: *a\n",
    "<<: ",
    "99999999999999999999h",
    "10000000000000000000s10000000000000000000s",
    "1e999",
    ".nan",
    "-.inf",
    "-1",
    "18446744073709551616",
    "0.000000000000000001ms",
    "\t",
    "\n",
    "\n  ",
    "- ",
    ": ",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "|",
    ">-",
    "---\n",
    "...\n",
    "%YAML 1.2\n",
    "? ",
    "#",
    "\u{feff}",
    "é",
    "\\xff",
    "~",
    "null",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

/// One change to a file's bytes.
#[derive(Debug, Clone)]
enum Mutation {
    Insert(Index, Index),
    Delete(Index, usize),
    SetByte(Index, u8),
    Duplicate(Index, usize),
    Truncate(Index),
    SwapLines(Index, Index),
    /// The run of digits at or after a place becomes a huge number (`10m` → `99…9m`).
    Enlarge(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), any::<Index>()).prop_map(|(at, token)| Mutation::Insert(at, token)),
        2 => (any::<Index>(), 1usize..24).prop_map(|(at, len)| Mutation::Delete(at, len)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::SetByte(at, byte)),
        1 => (any::<Index>(), 1usize..200).prop_map(|(at, len)| Mutation::Duplicate(at, len)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        2 => any::<Index>().prop_map(Mutation::Enlarge),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let len = bytes.len();
    let at = |index: &Index| if len == 0 { 0 } else { index.index(len + 1) };
    match mutation {
        Mutation::Insert(index, token) => {
            let token = TOKENS[token.index(TOKENS.len())].as_bytes();
            let at = at(index);
            bytes.splice(at..at, token.iter().copied());
        }
        Mutation::Delete(index, count) => {
            let start = at(index);
            let end = (start + count).min(len);
            bytes.drain(start..end);
        }
        Mutation::SetByte(index, byte) if len > 0 => bytes[index.index(len)] = *byte,
        Mutation::SetByte(..) => bytes.push(b'x'),
        Mutation::Duplicate(index, count) => {
            let start = at(index);
            let end = (start + count).min(len);
            let copy = bytes[start..end].to_vec();
            bytes.splice(end..end, copy);
        }
        Mutation::Truncate(index) => bytes.truncate(at(index)),
        Mutation::SwapLines(a, b) => {
            let mut lines: Vec<Vec<u8>> =
                bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
            let (a, b) = (a.index(lines.len()), b.index(lines.len()));
            lines.swap(a, b);
            *bytes = lines.join(&b'\n');
        }
        Mutation::Enlarge(index) => {
            let Some(start) = bytes[at(index).min(len)..]
                .iter()
                .position(u8::is_ascii_digit)
                .map(|offset| at(index) + offset)
            else {
                return;
            };
            let end = bytes[start..]
                .iter()
                .position(|b| !b.is_ascii_digit())
                .map_or(len, |offset| start + offset);
            bytes.splice(start..end, *b"99999999999999999999999");
        }
    }
}

/// Every YAML file under `scenarios/`, with its bytes.
fn scenario_files() -> &'static [(PathBuf, Vec<u8>)] {
    static FILES: OnceLock<Vec<(PathBuf, Vec<u8>)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut files = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "yaml") {
                    let bytes = std::fs::read(&path).unwrap();
                    files.push((path, bytes));
                }
            }
        }
        files.sort();
        assert!(files.len() > 10, "scenarios/ has its files");
        files
    })
}

/// Loads `bytes` as if they were the file at `path`, on a thread of its own so that a hang is
/// reported as one. Returns the error's text, or None when the scenario loaded.
fn load_in_time(path: &Path, bytes: Vec<u8>) -> Result<Option<String>, String> {
    let (done, outcome) = mpsc::channel();
    let path = path.to_owned();
    std::thread::spawn(move || {
        let result = load_bytes(&path, &bytes).map(|_| ()).map_err(|e| match &e {
            LoadError::Invalid(diagnostics) => {
                assert!(!diagnostics.is_empty(), "a refusal says why");
                e.to_string()
            }
            LoadError::Read { .. } => e.to_string(),
        });
        let _ = done.send(result);
    });
    match outcome.recv_timeout(HANG) {
        Ok(Ok(())) => Ok(None),
        Ok(Err(message)) => Ok(Some(message)),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("no answer within {HANG:?}")),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the loader panicked".to_owned()),
    }
}

proptest! {
    #![proptest_config(Config {
        cases: 1024,
        max_shrink_iters: 512,
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn mutated_scenarios_load_or_are_refused_without_panic_or_hang(
        file in any::<Index>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let files = scenario_files();
        let (path, original) = &files[file.index(files.len())];
        let mut bytes = original.clone();
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        let outcome = load_in_time(path, bytes);
        prop_assert!(outcome.is_ok(), "{}: {}", path.display(), outcome.unwrap_err());
    }
}

fn fuzz_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/fuzz.yaml")
}

#[test]
fn aliases_that_multiply_are_refused_before_they_fill_memory() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let previous = level - 1;
        text.push_str(&format!(
            "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
        ));
    }
    let message = load_in_time(&fuzz_path(), text.into_bytes())
        .unwrap()
        .expect("refused");
    assert!(message.contains("fuzz.yaml:"), "{message}");
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    let text = format!("lab: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let message = load_in_time(&fuzz_path(), text.into_bytes())
        .unwrap()
        .expect("refused");
    assert!(message.contains("fuzz.yaml:1:"), "{message}");
}

#[test]
fn a_file_larger_than_any_scenario_is_refused() {
    let text = format!("description: \"{}\"\n", "x".repeat(2 << 20));
    let message = load_in_time(&fuzz_path(), text.into_bytes())
        .unwrap()
        .expect("refused");
    assert!(message.contains("fuzz.yaml"), "{message}");
}
