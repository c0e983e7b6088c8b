use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `powerdiag --version`: version, git revision, build date and target (from build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("POWERDIAG_GIT_REVISION"),
    ", built ",
    env!("POWERDIAG_BUILD_DATE"),
    ", target ",
    env!("POWERDIAG_TARGET"),
    ")"
);

/// Performance diagnostics for MariaDB hosts: finds the known reasons why the same database is
/// N× slower on one machine than on another.
#[derive(Debug, Parser)]
#[command(
    name = "powerdiag",
    version = VERSION,
    propagate_version = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Check this host and its MariaDB server against every rule and print a report
    ///
    /// Exit status: 0 no warning or critical finding, 1 worst finding is a warning, 2 worst is
    /// critical, 3 powerdiag could not run (bad flag, unreadable config). An unreachable
    /// database is not exit 3: host checks still run and database checks report
    /// insufficient_data with the reason.
    Doctor(DoctorArgs),
    /// List every rule: code, name, severity and what it detects
    Rules(RulesArgs),
    /// List every collector: its name (for --collector.NAME / --no-collector.NAME and the
    /// agent's [collectors] table), whether it runs by default, what it needs and what it reads
    Collectors(CollectorsArgs),
    /// Print a rule's full explanation, its evidence from field reports, and the remediation
    Explain(ExplainArgs),
    /// Collect one snapshot of every fact doctor uses (no secrets) and write it as JSON
    ///
    /// Replay it anywhere with `powerdiag doctor --from FILE`; compare two hosts with
    /// `powerdiag diff A B`. The schema is docs/snapshot.schema.json.
    Collect(CollectCmd),
    /// Compare two snapshots: the differences that matter for database performance, ranked by
    /// the impact the field reports measured, and whether the hosts are comparable at all
    Diff(DiffArgs),
    /// Run as a service that Prometheus scrapes: samples on its own interval and serves the last
    /// sample at /metrics, /api/v1/snapshot, /healthz
    ///
    /// Exits 3 before binding when a flag or the configuration is wrong. SIGHUP reloads
    /// --config.file, --web.config.file and --mariadb.defaults-file (a bad file keeps the
    /// running one; powerdiag_config_last_reload_successful says how it went); SIGTERM stops
    /// within 5 s.
    Agent(AgentArgs),
    /// Print a shell completion script (the packages install them)
    ///
    /// bash: `powerdiag completions bash > /etc/bash_completion.d/powerdiag`; zsh: into a
    /// directory of $fpath as `_powerdiag`; fish: `~/.config/fish/completions/powerdiag.fish`.
    Completions(CompletionsArgs),
    /// Print the manual page powerdiag(1), or write it and one page per subcommand
    /// (powerdiag-doctor(1), ...) into a directory (the packages install them)
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write powerdiag.1 and powerdiag-SUBCOMMAND.1 into this directory (created if missing)
    /// instead of printing powerdiag(1)
    #[arg(long, value_name = "DIR")]
    pub(crate) output_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Logfmt,
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// Address to listen on: HOST:PORT, or :PORT for every interface. 9987 is powerdiag's
    /// default (the exporter port range 9100-9999 is fully allocated; this one is clear of
    /// node_exporter's 9100 and mysqld_exporter's 9104, which share MariaDB hosts)
    #[arg(
        long = "web.listen-address",
        default_value = ":9987",
        value_name = "ADDRESS"
    )]
    pub(crate) listen_address: String,

    /// Path under which to expose metrics
    #[arg(
        long = "web.telemetry-path",
        default_value = "/metrics",
        value_name = "PATH"
    )]
    pub(crate) telemetry_path: String,

    /// Web configuration in the Prometheus exporter-toolkit format (YAML): TLS certificate and
    /// key, client certificates, and `basic_auth_users` with bcrypt hashes. Reloaded on SIGHUP
    /// (new connections use it: rotate certificates and passwords without a restart)
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub(crate) web_config_file: Option<PathBuf>,

    /// Agent configuration (TOML): sample interval and timeout, probe schedule, disabled rules
    /// and rule thresholds. Reloaded on SIGHUP
    #[arg(long = "config.file", value_name = "PATH")]
    pub(crate) config_file: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) connection: ConnectionArgs,

    #[command(flatten)]
    pub(crate) collectors: crate::collector_flags::CollectorFlags,

    #[command(flatten)]
    pub(crate) paths: PathArgs,

    /// Least severe log messages shown
    #[arg(long = "log.level", value_enum, default_value_t = LogLevel::Info)]
    pub(crate) log_level: LogLevel,

    /// Log format, on stderr
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Logfmt)]
    pub(crate) log_format: LogFormat,
}

#[derive(Debug, Args)]
#[command(after_long_help = PROBE_HELP)]
pub(crate) struct CollectCmd {
    /// Where to write the snapshot (`-` for stdout)
    #[arg(short, long, value_name = "FILE", default_value = "-")]
    pub(crate) output: PathBuf,

    #[command(flatten)]
    pub(crate) collect: CollectArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// The first snapshot: a file (`powerdiag collect` output or a `doctor --format json`
    /// report, `-` for stdin) or a running agent (`http://host:9987`, `https://…`), whose last
    /// snapshot is read from /api/v1/snapshot
    #[arg(value_name = "A")]
    pub(crate) a: PathBuf,
    /// The second snapshot: a file or an agent URL
    #[arg(value_name = "B")]
    pub(crate) b: PathBuf,
    /// CA certificates (PEM) that sign the HTTPS agents' certificates
    #[arg(long = "agent.ca-file", value_name = "FILE")]
    pub(crate) agent_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for agents that require one (with --agent.key-file)
    #[arg(long = "agent.cert-file", value_name = "FILE")]
    pub(crate) agent_cert_file: Option<PathBuf>,
    /// Client certificate's private key (PEM)
    #[arg(long = "agent.key-file", value_name = "FILE")]
    pub(crate) agent_key_file: Option<PathBuf>,
    /// Basic auth user for the agents (their --web.config.file basic_auth_users)
    #[arg(long = "agent.username", value_name = "USER")]
    pub(crate) agent_username: Option<String>,
    /// File holding the basic auth password (never on the command line)
    #[arg(long = "agent.password-file", value_name = "FILE")]
    pub(crate) agent_password_file: Option<PathBuf>,
    /// Deadline for reading each agent's snapshot, from 1s to 10m
    #[arg(long = "agent.timeout", value_name = "DURATION", default_value = "30s", value_parser = parse_agent_timeout)]
    pub(crate) agent_timeout: std::time::Duration,
    /// Send --agent.username and the password to an http:// agent, in clear text (by default
    /// basic auth is sent only over https://)
    #[arg(long = "agent.allow-insecure-auth")]
    pub(crate) agent_allow_insecure_auth: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Colour in the text output: auto = only on a terminal and without NO_COLOR
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub(crate) color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
#[command(after_long_help = PROBE_HELP)]
pub(crate) struct DoctorArgs {
    /// Judge a recorded snapshot (`powerdiag collect -o FILE`, or a saved `doctor --format json`
    /// report) instead of this host: same report and exit status, on any platform. `-` reads
    /// stdin
    #[arg(long, value_name = "FILE", conflicts_with_all = ["mariadb_defaults_file", "no_probe", "sample_window", "statements_window", "dictionary_max_tables", "explain", "redact", "procfs", "sysfs", "rootfs"])]
    pub(crate) from: Option<PathBuf>,

    /// Judge with the rule settings of an agent configuration file (TOML: `[rules] disabled`
    /// and `[rules.thresholds.CODE]`), so doctor and the agent agree; its other sections are
    /// checked but unused
    #[arg(long = "config.file", value_name = "PATH")]
    pub(crate) config_file: Option<PathBuf>,

    /// Report format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,

    /// Colour in the text report: auto = only on a terminal and without NO_COLOR
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub(crate) color: ColorChoice,

    /// Statements in the report's "Top statements" section (busiest by time, from
    /// performance_schema); 0 leaves the section out
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(crate) statements: u32,

    #[command(flatten)]
    pub(crate) collect: CollectArgs,
}

/// Where MariaDB is: shared by `doctor`, `collect` and `agent`.
#[derive(Debug, Args)]
pub(crate) struct ConnectionArgs {
    /// MariaDB to check: mysql://USER[:PASSWORD]@HOST[:PORT]/ (or ?socket=/path). TLS with
    /// ?ssl-ca=FILE (verifies the server's certificate and host name), &ssl-cert=FILE&ssl-key=FILE
    /// (client certificate), &ssl-verify-server-cert=0 (encrypt without verifying), ssl=1,
    /// ssl-mode=DISABLED|PREFERRED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY, or mysql_async's
    /// require_ssl, verify_ca, verify_identity. Prefer the environment variable or a defaults file
    /// for the password: argv is visible to every user
    #[arg(
        long = "mariadb.url",
        env = "POWERDIAG_MARIADB_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) mariadb_url: Option<String>,

    /// my.cnf whose [client] section gives user, password, host, port, socket and TLS (ssl-ca,
    /// ssl-cert, ssl-key, ssl-verify-server-cert, ssl, ssl-mode), as mysqld_exporter's
    /// --config.my-cnf; !include FILE and !includedir DIR are read, relative paths from the
    /// file's own directory. Keep it mode 0600 (a warning otherwise). Without --mariadb.url and
    /// this, powerdiag tries ~/.my.cnf, then the usual local sockets, then 127.0.0.1:3306
    #[arg(long = "mariadb.defaults-file", value_name = "PATH")]
    pub(crate) mariadb_defaults_file: Option<PathBuf>,
}

/// What to collect and from where: shared by `doctor` and `collect`.
#[derive(Debug, Args)]
pub(crate) struct CollectArgs {
    #[command(flatten)]
    pub(crate) connection: ConnectionArgs,

    /// Do not run the probe queries (what they run: --help)
    #[arg(
        long,
        long_help = "Do not run the probe queries (what they run: below)"
    )]
    pub(crate) no_probe: bool,

    /// Distinct k-NN queries the probe runs per vector index
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) probe_queries: u32,

    /// Deadline for connecting and for each SQL statement, e.g. 5s, 500ms, 1m
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = parse_timeout)]
    pub(crate) timeout: Duration,

    /// How long to watch the host for rates (steal time, hardware counters of mariadbd); it
    /// overlaps the probe. 0 skips the window: shares since boot, no counters
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_window)]
    pub(crate) sample_window: Duration,

    /// Statement digests judged: those the server ran within this long before the read
    /// (their counts are totals since the digest table was last reset), e.g. 15m, 1h
    #[arg(long, default_value = "15m", value_name = "DURATION", value_parser = parse_statements_window)]
    pub(crate) statements_window: Duration,

    /// Above this many InnoDB tables (with persistent statistics), leave out the reads of
    /// InnoDB's dictionary whose cost grows with the tables: the schema read (PD705-PD708 say
    /// so; --collector.mariadb_schema reads it anyway) and the dictionary scans that size
    /// InnoDB and list vector indexes: on the server's host they are then taken from the data
    /// directory's files (the size an upper bound, PD205 says so), elsewhere from the
    /// persistent statistics
    #[arg(long, default_value_t = powerdiag_agent::collect::DEFAULT_DICTIONARY_MAX_TABLES, value_name = "N")]
    pub(crate) dictionary_max_tables: u64,

    /// For the statements the statement rules can name (up to 5 SELECTs), read one recent
    /// concrete execution from performance_schema's statement history and run EXPLAIN
    /// FORMAT=JSON on it (plain SELECTs only, read-only, at most 2 s each). The report then
    /// shows literals from production: add --redact to replace them
    #[arg(long)]
    pub(crate) explain: bool,

    /// With --explain: replace the literals of the concrete statements and their plans by ?
    #[arg(long, requires = "explain")]
    pub(crate) redact: bool,

    #[command(flatten)]
    pub(crate) paths: PathArgs,

    #[command(flatten)]
    pub(crate) collectors: crate::collector_flags::CollectorFlags,
}

/// `--agent.timeout`: bounded, so a typo cannot make `diff` wait for ever, and never zero.
fn parse_agent_timeout(s: &str) -> Result<Duration, String> {
    const RANGE: &str = "between 1s and 10m (examples: 5s, 30s, 2m)";
    let d =
        humantime::parse_duration(s.trim()).map_err(|e| format!("{e}: give a duration {RANGE}"))?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(600) {
        return Err(format!(
            "{s:?} is not {RANGE}: the deadline for reading each agent's snapshot"
        ));
    }
    Ok(d)
}

fn parse_statements_window(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| format!("{s:?}: {e}"))?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(366 * 86_400) {
        return Err(format!(
            "{s:?} is not between 1s and 366d: the window of recently seen statements"
        ));
    }
    Ok(d)
}

/// node_exporter's flags: read a recorded tree instead of the live system.
#[derive(Debug, Args)]
pub(crate) struct PathArgs {
    /// procfs mount point (a recorded tree's `recorded/` beside it adds the recorded window
    /// and free space)
    #[arg(long = "path.procfs", default_value = "/proc", value_name = "PATH")]
    pub(crate) procfs: PathBuf,
    /// sysfs mount point
    #[arg(long = "path.sysfs", default_value = "/sys", value_name = "PATH")]
    pub(crate) sysfs: PathBuf,
    /// root of the host's file system (for the server's pid file and /etc)
    #[arg(long = "path.rootfs", default_value = "/", value_name = "PATH")]
    pub(crate) rootfs: PathBuf,
}

fn parse_window(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let d =
        humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (examples: 1s, 500ms, 0)"))?;
    if d > Duration::from_secs(60) {
        return Err("must be at most 1m".into());
    }
    Ok(d)
}

const PROBE_HELP: &str = "\
The probe (on by default; --no-probe turns it off) is read-only and session-scoped. On MariaDB
11.7+ with vector indexes, for at most 3 indexes (largest first) and about 2 s each, it:
  1. reads up to N stored vectors (N = --probe-queries, default 20), by primary-key seeks;
  2. runs N queries  SELECT 1 FROM t ORDER BY VEC_DISTANCE_<index distance>(col, <stored vector
     + 5% Gaussian noise>) LIMIT 10, then repeats the first N/4 of them; between queries it reads
     SHOW SESSION STATUS for Handler_read_last, Handler_read_rnd and
     Innodb_buffer_pool_read_requests;
  3. profiles one more such query with SET SESSION profiling = 1 and SHOW PROFILE ALL.
The session runs with SET SESSION TRANSACTION READ ONLY and max_statement_time = --timeout.
The queries warm the vector cache as any query would; they write nothing.";

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = if let Ok(secs) = s.trim().parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err("must be a positive number of seconds".into());
        }
        Duration::from_secs_f64(secs)
    } else {
        humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (examples: 5s, 500ms, 1m)"))?
    };
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err("must be between 100ms and 1h".into());
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub(crate) struct RulesArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Debug, Args)]
pub(crate) struct CollectorsArgs {
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// Rule code (PD101) or name (mhnsw-cache-undersized)
    #[arg(value_name = "RULE")]
    pub(crate) rule: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_timeouts_are_bounded() {
        assert_eq!(parse_agent_timeout("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_agent_timeout("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_agent_timeout("10m"), Ok(Duration::from_secs(600)));
        for bad in ["0s", "0", "999ms", "10m 1s", "100000000years", "forever"] {
            let e = parse_agent_timeout(bad).unwrap_err();
            assert!(e.contains("between 1s and 10m"), "{bad}: {e}");
        }
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_timeout("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_timeout("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_timeout("0").is_err());
        assert!(parse_timeout("-1").is_err());
        assert!(parse_timeout("NaN").is_err());
        assert!(parse_timeout("forever").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
