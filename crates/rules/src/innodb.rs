//! InnoDB facts read in one bounded statement each: the data and index size (PD205) and the
//! oldest open transaction (PD215).

use serde::{Deserialize, Serialize};

use crate::{Gathered, MariadbFacts, Verdict};

/// InnoDB data and index size from the persistent statistics (`mysql.innodb_table_stats`):
/// pages × `innodb_page_size`, summed in one statement whatever the number of tables.
///
/// It misses what has no persistent statistics: tables created with `STATS_PERSISTENT=0` or
/// under `innodb_stats_persistent=OFF`, temporary tables, the system tablespace's own pages
/// (undo logs, the change buffer, the dictionary); and it lags: InnoDB recalculates a table's
/// statistics after about 10% of its rows changed (`innodb_stats_auto_recalc`), so a table
/// loaded a moment ago may still show its old size. Compressed tables count whole pages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InnodbSize {
    /// Tables and partitions with persistent statistics (rows of `innodb_table_stats`).
    pub tables: u64,
    /// Clustered-index pages × page size: the rows, bytes.
    pub data_bytes: u64,
    /// Secondary-index pages × page size, bytes.
    pub index_bytes: u64,
    /// Seconds since the oldest table's statistics were last updated (server clock).
    #[serde(default)]
    pub oldest_stats_age_seconds: Option<u64>,
    /// Read from the files instead (doctor above `--dictionary-max-tables`, on the server's
    /// host): the sizes of the file-per-table tablespaces (`*.ibd` under the data directory),
    /// data and indexes together in `data_bytes` with their free pages (an upper bound), and
    /// `tables` the files. Misses tables in the system tablespace.
    #[serde(default)]
    pub from_files: bool,
}

impl InnodbSize {
    /// Data and indexes, bytes.
    pub fn total_bytes(&self) -> u64 {
        self.data_bytes.saturating_add(self.index_bytes)
    }
}

/// The open InnoDB transactions (`information_schema.INNODB_TRX`), at one read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Transactions {
    /// Transactions open at the read.
    pub open: u64,
    /// The oldest of them, if any.
    pub oldest: Option<OpenTransaction>,
}

/// One open transaction and the session holding it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenTransaction {
    /// The connection id (`trx_mysql_thread_id`): `KILL` takes it.
    pub thread_id: u64,
    /// Seconds since the transaction started (`trx_started`, server clock).
    pub age_seconds: u64,
    /// `RUNNING`, `LOCK WAIT`, `ROLLING BACK`, `COMMITTING`.
    pub state: String,
    pub rows_modified: u64,
    pub rows_locked: u64,
    /// The session's user and client host (`information_schema.PROCESSLIST`), when visible.
    pub user: Option<String>,
    pub host: Option<String>,
    /// The session's command (`Sleep`: idle inside its transaction) and seconds in it.
    pub command: Option<String>,
    pub command_seconds: Option<u64>,
}

pub(crate) fn innodb_size_not_recorded() -> Gathered<InnodbSize> {
    Gathered::Unavailable("not recorded: the snapshot predates InnoDB sizes".into())
}

pub(crate) fn transactions_not_recorded() -> Gathered<Transactions> {
    Gathered::Unavailable("not recorded: the snapshot predates transaction reads".into())
}

impl MariadbFacts {
    /// The InnoDB data size, or the `insufficient_data` verdict naming why it is missing.
    pub fn innodb_size(&self) -> Result<&InnodbSize, Verdict> {
        match &self.innodb_size {
            Gathered::Available(s) => Ok(s),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "InnoDB data size unavailable: {why}"
            ))),
        }
    }

    /// The open transactions, or the `insufficient_data` verdict naming why they are missing.
    pub fn transactions(&self) -> Result<&Transactions, Verdict> {
        match &self.transactions {
            Gathered::Available(t) => Ok(t),
            Gathered::Unavailable(why) => Err(Verdict::insufficient(format!(
                "open transactions unavailable: {why}"
            ))),
        }
    }
}
