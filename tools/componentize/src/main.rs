//! `componentize <in.wasm> <out.wasm> [--adapter reactor|command] [--list-imports]`
//! (also `wasm-mcp componentize`); the logic is in the library.

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    componentize::cli(&argv)
}
