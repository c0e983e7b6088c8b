use crate::{Limits, Rule, Snapshot, Var, Verdict, declare_rule};

declare_rule! {
    /// ### What it does
    /// On Linux, checks that InnoDB uses the kernel's asynchronous I/O
    /// (`innodb_use_native_aio=ON`: io_uring or libaio). On AIX it reports, as information, that
    /// InnoDB always simulates asynchronous I/O with synchronous `pread`/`pwrite` on worker
    /// threads, whatever the variable says. The server's platform comes from
    /// `@@version_compile_os`.
    ///
    /// ### Why is this bad?
    /// Without native AIO, InnoDB issues page reads and writes synchronously from a pool of
    /// I/O threads (MariaDB's `tpool/aio_simulated.cc`), which queues requests behind each
    /// other under load. The effect depends on the I/O size: in one measurement, with 1 KB
    /// buffers POSIX AIO was slower than plain reads, while with 48 KB buffers AIO read 1 GB in
    /// 0.36 s instead of 0.79 s on Linux. InnoDB's 16 KB pages sit in between, so this is
    /// information to act on when the server is I/O-bound, not a verdict on its own.
    ///
    /// ### Remediation
    /// ```ini
    /// [mariadbd]
    /// innodb_use_native_aio = ON
    /// ```
    ///
    /// The variable needs a restart. If it was turned off on purpose (an old kernel, a
    /// container without io_uring/libaio, a file system without O_DIRECT), record why. On AIX
    /// there is nothing to change: size `innodb_read_io_threads`/`innodb_write_io_threads` for
    /// the storage instead.
    pub struct InnodbNativeAioOff {
        code: "PD203",
        name: "innodb-native-aio-off",
        severity: Info,
        scope: Database,
        summary: "InnoDB does not use the kernel's asynchronous I/O",
        fails_when: "Linux with `innodb_use_native_aio=OFF` (AIX: AIO is always simulated)",
        severity_why: "info: the effect of native AIO depends on the I/O size and is not measured here, so it is advice",
    }
}

impl Rule for InnodbNativeAioOff {
    fn check(&self, s: &Snapshot, _limits: &Limits) -> Result<Verdict, Verdict> {
        let db = s.db()?;
        let os = match db.var(Var::VersionCompileOs) {
            Ok(os) => os.to_ascii_lowercase(),
            Err(_) if db.same_host == Some(true) => s.host()?.os.clone(),
            Err(v) => return Err(v),
        };
        if os.contains("aix") {
            return Ok(Verdict::fail(
                "on AIX InnoDB always simulates asynchronous I/O with synchronous reads and writes on worker threads",
            )
            .with_evidence(format!("version_compile_os = {os}"))
            .with_remediation(
                "Nothing to switch on: size innodb_read_io_threads and innodb_write_io_threads for the storage.",
            ));
        }
        if !os.contains("linux") {
            return Err(Verdict::not_applicable(format!(
                "native AIO is a Linux setting; the server was built for {os}"
            )));
        }
        let on = db.var_bool(Var::InnodbUseNativeAio)?;
        let evidence = format!("innodb_use_native_aio = {}", if on { "ON" } else { "OFF" });
        Ok(if on {
            Verdict::pass("InnoDB uses native asynchronous I/O").with_evidence(evidence)
        } else {
            Verdict::fail("innodb_use_native_aio is OFF: InnoDB simulates asynchronous I/O with synchronous calls")
                .with_evidence(evidence)
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::verdict;
    use crate::{Status, testing::SnapshotBuilder};

    /// A snapshot on which this rule fails (the registry-wide tests run every rule on its own).
    pub(crate) fn failing_example() -> crate::Snapshot {
        crate::rules::examples::old_server()
    }

    fn check(os: &str, aio: &str) -> Verdict {
        let s = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .var(Var::VersionCompileOs, os)
            .var(Var::InnodbUseNativeAio, aio)
            .build();
        verdict(&InnodbNativeAioOff, &s)
    }

    #[test]
    fn verdicts() {
        assert_eq!(check("debian-linux-gnu", "ON").status, Status::Pass);
        assert_eq!(check("Linux", "OFF").status, Status::Fail);
        assert_eq!(check("AIX", "ON").status, Status::Fail);
        assert_eq!(check("Win64", "ON").status, Status::NotApplicable);
        assert_eq!(check("Linux", "sometimes").status, Status::InsufficientData);
    }

    #[test]
    fn falls_back_to_the_local_host_os() {
        let s = SnapshotBuilder::new()
            .mariadb("10.11.14-MariaDB")
            .without_var(Var::VersionCompileOs)
            .var(Var::InnodbUseNativeAio, "OFF")
            .build();
        assert_eq!(verdict(&InnodbNativeAioOff, &s).status, Status::Fail);
    }
}
