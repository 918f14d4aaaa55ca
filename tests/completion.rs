#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo completion SHELL` as a user runs it: the real binary, and for bash
//! the script loaded into a real bash, which must then offer the verbs.

use std::process::{Command, Output};

const EXO: &str = env!("CARGO_BIN_EXE_exo");

fn completion(shell: &str) -> Output {
    Command::new(EXO)
        .args(["completion", shell])
        .output()
        .expect("run exo")
}

fn stdout_of(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn every_shell_gets_a_script_naming_the_verbs() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(&completion(shell));
        for verb in ["release", "attach", "fs", "audit", "operator", "completion"] {
            assert!(script.contains(verb), "{shell}: no {verb:?} in the script");
        }
    }
    // Nested verbs too.
    let bash = stdout_of(&completion("bash"));
    for sub in ["rollout", "promote", "suspend"] {
        assert!(bash.contains(sub), "bash: no {sub:?}");
    }
}

#[test]
fn bash_completes_the_verbs_from_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("exo.bash");
    std::fs::write(&path, stdout_of(&completion("bash"))).unwrap();
    // What bash does on `exo re<TAB>`: call the registered function with
    // the words so far, then read COMPREPLY.
    let probe = format!(
        "source {}; COMP_WORDS=(exo re); COMP_CWORD=1; COMP_LINE='exo re'; COMP_POINT=6; \
         _exo exo re exo; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        path.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .output()
        .expect("bash is part of the test environment");
    let offered = stdout_of(&out);
    let offered: Vec<&str> = offered.lines().collect();
    assert_eq!(offered, ["release"], "{offered:?}");
}

#[test]
fn an_unknown_shell_is_refused_with_the_choices() {
    let out = completion("tcsh");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bash") && err.contains("zsh"), "{err}");
}
