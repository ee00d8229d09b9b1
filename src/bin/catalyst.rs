//! `catalyst`: the command line (see [`catalyst::cli::app`]).

fn main() -> std::process::ExitCode {
    catalyst::cli::app::main()
}
