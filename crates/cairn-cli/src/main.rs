//! `cairn`: fsspec-style file commands over every cairn-fs backend.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

mod ckpt;
mod interrupt;
mod job;
mod metrics_export;
mod transfer;

use cairn_fs::{FileInfo, FileSystem, StorageOptions};
use clap::{Args, Parser, Subcommand};

/// Files on any storage cairn knows: s3://, file://, memory:// and plain paths.
#[derive(Parser, Debug)]
#[command(name = "cairn", version, about)]
struct Cli {
    /// A storage option as protocol.key=value (e.g. -o s3.endpoint_url=http://127.0.0.1:9000,
    /// -o s3.config_kwargs.s3.addressing_style=virtual); repeatable. Options also come
    /// from the environment (AWS_* for s3).
    #[arg(
        short = 'o',
        long = "option",
        global = true,
        value_name = "PROTOCOL.KEY=VALUE",
        value_parser = option_assignment
    )]
    options: Vec<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List a directory (or show a file).
    Ls {
        /// The directory or file (any cairn URL or local path).
        url: String,
        /// Sizes and types too.
        #[arg(short, long)]
        long: bool,
        #[command(flatten)]
        out: Output,
    },
    /// Describe one file or directory.
    Stat {
        /// The file or directory.
        url: String,
        #[command(flatten)]
        out: Output,
    },
    /// Print a file's contents.
    Cat {
        /// The file.
        url: String,
    },
    /// Upload local files.
    Put(Transfer),
    /// Download to local files.
    Get(Transfer),
    /// Copy (within a store, or between any two stores and local disk).
    Cp(Transfer),
    /// Move (between two stores: copy everything, then remove the sources).
    Mv(Transfer),
    /// Remove files (with -r, directories too).
    Rm {
        /// Files (or, with -r, directories) to remove; globs allowed.
        #[arg(required = true)]
        urls: Vec<String>,
        /// Remove directories and everything under them.
        #[arg(short, long)]
        recursive: bool,
        /// With -r, go at most this many levels down.
        #[arg(long)]
        maxdepth: Option<usize>,
    },
    /// Every file under a path.
    Find {
        /// The directory to search.
        url: String,
        /// Go at most this many levels down.
        #[arg(long)]
        maxdepth: Option<usize>,
        /// List directories too.
        #[arg(long)]
        withdirs: bool,
        #[command(flatten)]
        out: Output,
    },
    /// Total size of the files under a path.
    Du {
        /// The directory to measure.
        url: String,
        /// Count files at most this many levels down.
        #[arg(long)]
        maxdepth: Option<usize>,
        #[command(flatten)]
        out: Output,
    },
    /// Make a directory and its parents.
    Mkdir {
        /// The directory to make.
        url: String,
    },
    /// Inspect and repair checkpoint directories (cairn's or Ray Data's).
    #[command(subcommand)]
    Ckpt(ckpt::CkptCommand),
    /// Resumable map-only jobs: run, sample input, verify output.
    #[command(subcommand)]
    Job(job::JobCommand),
    /// Show every resolved option of the URL's backend and where it came from
    /// (default, environment variable, FSSPEC_ variable, -o option); secrets redacted.
    Config {
        /// A URL of the backend to describe.
        url: String,
        #[command(flatten)]
        out: Output,
    },
}

#[derive(Args, Debug)]
struct Output {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct Transfer {
    /// Source; a trailing slash copies a directory's contents.
    src: String,
    /// Target; a trailing slash marks a directory.
    dst: String,
    /// Directories too, with everything under them.
    #[arg(short, long)]
    recursive: bool,
    /// With -r, go at most this many levels down.
    #[arg(long)]
    maxdepth: Option<usize>,
}

fn main() -> ExitCode {
    cairn_checkpoint::internals::failpoint::setup_from_env();
    let args: Vec<String> = std::env::args().collect();
    if let Some(message) = spaced_option(&args) {
        eprintln!("cairn: {message}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(args);
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CAIRN_LOG")
                // Retry notices are OpenDAL's; the final error says what failed.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,opendal::layers::retry=error")
                }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Cli { options, command } = cli;
    let coded = match command {
        Command::Ckpt(command) => storage_options(&options)
            .map_err(Into::into)
            .and_then(|o| runtime.block_on(ckpt::run(command, &o))),
        Command::Job(command) => storage_options(&options)
            .map_err(Into::into)
            .and_then(|o| runtime.block_on(job::run(command, &o))),
        command => runtime
            .block_on(run(Cli { options, command }))
            .map(|()| 0)
            .map_err(Into::into),
    };
    match coded {
        Ok(code) => ExitCode::from(code),
        // The reader of our output went away (`cairn ckpt ids | head`):
        // nothing is wrong, and nothing more to say.
        Err(e) if is_broken_pipe(e.as_ref()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn: {e}");
            ExitCode::FAILURE
        }
    }
}

fn storage_options(assignments: &[String]) -> cairn_fs::Result<StorageOptions> {
    let mut options = StorageOptions::new();
    for assignment in assignments {
        options.set_dotted(assignment)?;
        // Options of a protocol nothing serves would be ignored: a typo.
        let protocol = assignment.split(['.', '=']).next().unwrap_or_default();
        if let Err(e) = cairn_fs::Registry::global().resolve(protocol) {
            return Err(cairn_fs::Error::new(
                cairn_fs::ErrorKind::Config,
                format!(
                    "option {}: {}",
                    assignment.split('=').next().unwrap_or_default(),
                    e.message()
                ),
            ));
        }
    }
    Ok(options)
}

/// Whether `e` (or what caused it) is a write to a closed pipe.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(err) = current {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        current = err.source();
    }
    false
}

/// `-o key value` (a space where `=` belongs): clap would call the value
/// an unknown subcommand, so say what to write instead.
fn spaced_option(args: &[String]) -> Option<String> {
    let at = args.iter().position(|a| a == "-o" || a == "--option")?;
    let key = args.get(at + 1)?;
    if key.contains('=') {
        return spaced_option(&args[at + 1..]);
    }
    // The next word, unless it is a command (`-o s3.anon ls ...`).
    let commands = [
        "ls", "stat", "cat", "put", "get", "cp", "mv", "rm", "find", "du", "mkdir", "config",
        "ckpt", "job",
    ];
    let value = args
        .get(at + 2)
        .map(String::as_str)
        .filter(|v| !commands.contains(v))
        .unwrap_or("VALUE");
    Some(format!(
        "-o takes PROTOCOL.KEY=VALUE with no space around '=': write -o {key}={value}"
    ))
}

/// Checks one `-o` value is `key=value` (a space instead of `=` makes the
/// value the next word, and clap would then call it a subcommand).
fn option_assignment(value: &str) -> Result<String, String> {
    match value.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => Ok(value.to_string()),
        _ => Err(format!(
            "expected PROTOCOL.KEY=VALUE with no space around '=': write -o {value}=VALUE (e.g. -o s3.region=us-east-1)"
        )),
    }
}

/// A local path given where a URL belongs and the other way round:
/// `put`/`get` with their arguments swapped.
fn swapped_transfer(command: &str, src: &str, dst: &str) -> Option<cairn_fs::Error> {
    let remote = |s: &str| {
        let (scheme, _) = cairn_fs::split_protocol(s);
        scheme.is_some_and(|p| !matches!(p.as_str(), "file" | "local"))
    };
    let (should_be_local, should_be_remote, other, fix) = match command {
        "put" => (src, dst, "get", format!("cairn get {src} {dst}")),
        _ => (dst, src, "put", format!("cairn put {src} {dst}")),
    };
    (remote(should_be_local) && !remote(should_be_remote)).then(|| {
        cairn_fs::Error::new(
            cairn_fs::ErrorKind::InvalidUrl,
            format!(
                "`cairn {command}` takes {}; {should_be_local} is a URL and {should_be_remote} a local path. To {}, use `{fix}` ({other})",
                if command == "put" {
                    "LOCAL_PATH URL (it uploads)"
                } else {
                    "URL LOCAL_PATH (it downloads)"
                },
                if command == "put" { "download" } else { "upload" }
            ),
        )
    })
}

async fn run(cli: Cli) -> cairn_fs::Result<()> {
    let options = storage_options(&cli.options)?;
    let open = |url: &str| FileSystem::from_url(url, &options);
    let mut stdout = std::io::stdout().lock();
    match cli.command {
        Command::Ls { url, long, out } => {
            let (fs, path) = open(&url)?;
            let entries = fs.ls(&path).await?;
            print_infos(&mut stdout, &entries, out.json, long)?;
        }
        Command::Stat { url, out } => {
            let (fs, path) = open(&url)?;
            let info = fs.info(&path).await?;
            if out.json {
                print_json(&mut stdout, &info)?;
            } else {
                print_infos(&mut stdout, &[info], false, true)?;
            }
        }
        Command::Cat { url } => {
            let (fs, path) = open(&url)?;
            let data = fs.cat(&path).await?;
            stdout.write_all(&data)?;
        }
        Command::Put(t) => {
            if let Some(e) = swapped_transfer("put", &t.src, &t.dst) {
                return Err(e);
            }
            let (fs, _) = open(&t.dst)?;
            fs.put_with(&t.src, &t.dst, tree_options(&t)).await?;
        }
        Command::Get(t) => {
            if let Some(e) = swapped_transfer("get", &t.src, &t.dst) {
                return Err(e);
            }
            let (fs, _) = open(&t.src)?;
            fs.get_with(&t.src, &t.dst, tree_options(&t)).await?;
        }
        Command::Cp(t) => {
            let (src_fs, _) = open(&t.src)?;
            let (dst_fs, _) = open(&t.dst)?;
            let options = tree_options(&t);
            match (src_fs.protocol(), dst_fs.protocol()) {
                (a, b) if a == b => src_fs.cp_with(&t.src, &t.dst, options).await?,
                _ => {
                    transfer::between_stores(&src_fs, &t.src, &dst_fs, &t.dst, options, false)
                        .await?
                }
            }
        }
        Command::Mv(t) => {
            let (src_fs, _) = open(&t.src)?;
            let (dst_fs, _) = open(&t.dst)?;
            let options = tree_options(&t);
            if src_fs.protocol() == dst_fs.protocol() {
                src_fs.mv_with(&t.src, &t.dst, options).await?;
            } else {
                transfer::between_stores(&src_fs, &t.src, &dst_fs, &t.dst, options, true).await?;
            }
        }
        Command::Rm {
            urls,
            recursive,
            maxdepth,
        } => {
            for url in &urls {
                let (fs, _) = open(url)?;
                fs.rm_with(
                    url,
                    cairn_fs::TreeOptions::new()
                        .recursive(recursive)
                        .max_depth_opt(maxdepth),
                )
                .await?;
            }
        }
        Command::Find {
            url,
            maxdepth,
            withdirs,
            out,
        } => {
            let (fs, path) = open(&url)?;
            let found = fs
                .find_with(
                    &path,
                    cairn_fs::FindOptions::new()
                        .max_depth_opt(maxdepth)
                        .with_dirs(withdirs),
                )
                .await?;
            print_infos(&mut stdout, &found, out.json, false)?;
        }
        Command::Du { url, maxdepth, out } => {
            let (fs, path) = open(&url)?;
            let usage = fs
                .du_with(&path, cairn_fs::FindOptions::new().max_depth_opt(maxdepth))
                .await?;
            if out.json {
                print_json(
                    &mut stdout,
                    &serde_json::json!({"path": path, "bytes": usage.bytes, "files": usage.files}),
                )?;
            } else {
                writeln!(stdout, "{}\t{}\t{path}", usage.bytes, usage.files)?;
            }
        }
        Command::Mkdir { url } => {
            let (fs, path) = open(&url)?;
            fs.mkdir(&path).await?;
        }
        Command::Ckpt(_) | Command::Job(_) => unreachable!("handled in main"),
        Command::Config { url, out } => {
            let (fs, _) = open(&url)?;
            let lines = fs.describe();
            if out.json {
                let rows: Vec<serde_json::Value> = lines
                    .iter()
                    .map(|l| {
                        // A null given for an option is reported as null: unset.
                        let value = if l.unset { serde_json::Value::Null } else { l.value.clone().into() };
                        let mut row = serde_json::json!({"option": l.name, "value": value, "source": l.source.to_string()});
                        if let Some(note) = &l.note {
                            row["note"] = note.clone().into();
                        }
                        row
                    })
                    .collect();
                print_json(
                    &mut stdout,
                    &serde_json::json!({"protocol": fs.protocol(), "options": rows}),
                )?;
            } else {
                writeln!(stdout, "protocol: {}", fs.protocol())?;
                let width = lines.iter().map(|l| l.name.len()).max().unwrap_or(0);
                for l in &lines {
                    match &l.note {
                        Some(note) => writeln!(
                            stdout,
                            "{:width$}  {}  ({}; {note})",
                            l.name, l.value, l.source
                        )?,
                        None => writeln!(stdout, "{:width$}  {}  ({})", l.name, l.value, l.source)?,
                    }
                }
            }
        }
    }
    stdout.flush()?;
    Ok(())
}

/// The tree options of a transfer's flags.
fn tree_options(t: &Transfer) -> cairn_fs::TreeOptions {
    cairn_fs::TreeOptions::new()
        .recursive(t.recursive)
        .max_depth_opt(t.maxdepth)
}

fn print_json(out: &mut impl Write, value: &impl serde::Serialize) -> cairn_fs::Result<()> {
    let text = serde_json::to_string_pretty(value).expect("plain data serializes");
    writeln!(out, "{text}")?;
    Ok(())
}

fn print_infos(
    out: &mut impl Write,
    infos: &[FileInfo],
    json: bool,
    long: bool,
) -> cairn_fs::Result<()> {
    if json {
        return print_json(out, &infos);
    }
    for info in infos {
        let slash = if info.is_dir() { "/" } else { "" };
        if long {
            let kind = if info.is_dir() { "dir " } else { "file" };
            let modified = info.last_modified.as_deref().unwrap_or("-");
            writeln!(
                out,
                "{kind} {:>12} {modified:>30} {}{slash}",
                info.size, info.name
            )?;
        } else {
            writeln!(out, "{}{slash}", info.name)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_argument_has_help_text() {
        use clap::CommandFactory;
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    missing.push(format!("{path} {} (no about)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "cairn", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn cli_parses_options_and_flags() {
        let cli = Cli::try_parse_from([
            "cairn",
            "cp",
            "-r",
            "-o",
            "s3.endpoint_url=http://x",
            "a/",
            "s3://b/c",
        ])
        .unwrap();
        assert_eq!(cli.options, ["s3.endpoint_url=http://x"]);
        assert!(matches!(
            cli.command,
            Command::Cp(Transfer {
                recursive: true,
                ..
            })
        ));
        assert!(storage_options(&["bad".into()]).is_err());
    }
}
