//! The `stub-claude` binary: everything lives in the library, so catalyst can run the same
//! code through a hidden subcommand.

fn main() {
    // Arguments that are not UTF-8 cannot be Claude Code flags; they are passed on lossily so
    // the parser refuses them with a message instead of the process panicking.
    let args = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    std::process::exit(stub_claude::run(args));
}
