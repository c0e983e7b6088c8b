//! A group of software perf events on one thread of another process, enabled, disabled and
//! read as one (`PERF_IOC_FLAG_GROUP`, `PERF_FORMAT_GROUP`). The perf-event crate makes groups
//! only on its own process, so this opens them through its system-call bindings.
//!
//! Why: enabling or disabling a counter on another thread makes the kernel interrupt the CPU
//! that thread last ran on (`event_function_call`; a VM exit in a guest). One counter per
//! event cost two such interrupts per event, thread and window (a quarter of the OS sections'
//! CPU here, measured); a group costs two per thread, and one `read` returns every event.
//! Only software events are grouped: they always fit together, while hardware events that
//! the PMU cannot count at once would leave a whole group unscheduled.

use std::{
    fs::File,
    io::{self, Read},
    os::fd::{AsRawFd, FromRawFd},
};

use perf_event_open_sys::{
    self as sys,
    bindings::{
        PERF_FLAG_FD_CLOEXEC, PERF_FORMAT_GROUP, PERF_IOC_FLAG_GROUP, PERF_TYPE_SOFTWARE,
        perf_event_attr,
    },
};

/// Software events (`PERF_COUNT_SW_*` ids) counted together on one thread.
#[derive(Debug)]
pub(super) struct Group {
    /// The first event's counter; the others are its members, in the order opened.
    leader: File,
    members: Vec<File>,
}

impl Group {
    /// Opens `configs` on thread `tid`, disabled. The error is the first `perf_event_open`
    /// that failed (the caller explains its errno).
    pub(super) fn open(tid: u32, configs: &[u64]) -> io::Result<Group> {
        let Some((&first, rest)) = configs.split_first() else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let tid = i32::try_from(tid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let leader = open_one(tid, first, None)?;
        let members = rest
            .iter()
            .map(|&c| open_one(tid, c, Some(&leader)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Group { leader, members })
    }

    /// The kernel's id of the leader: tells a kept group from a new one.
    #[cfg(test)]
    pub(super) fn id(&self) -> u64 {
        let mut id = 0u64;
        // SAFETY: `leader` is an open perf event descriptor; ID writes one u64 to `id`.
        check(unsafe { sys::ioctls::ID(self.leader.as_raw_fd(), &mut id) }).map_or(0, |()| id)
    }

    pub(super) fn reset(&self) -> io::Result<()> {
        // SAFETY: an open perf event descriptor; RESET takes a flag word.
        check(unsafe { sys::ioctls::RESET(self.leader.as_raw_fd(), PERF_IOC_FLAG_GROUP) })
    }

    pub(super) fn enable(&self) -> io::Result<()> {
        // SAFETY: as above.
        check(unsafe { sys::ioctls::ENABLE(self.leader.as_raw_fd(), PERF_IOC_FLAG_GROUP) })
    }

    pub(super) fn disable(&self) -> io::Result<()> {
        // SAFETY: as above.
        check(unsafe { sys::ioctls::DISABLE(self.leader.as_raw_fd(), PERF_IOC_FLAG_GROUP) })
    }

    /// Every event's count, in the order opened.
    pub(super) fn read(&mut self) -> io::Result<Vec<u64>> {
        // PERF_FORMAT_GROUP without times or ids: { u64 nr; u64 values[nr]; }.
        let want = 1 + 1 + self.members.len();
        let mut buf = vec![0u8; want * 8];
        let n = self.leader.read(&mut buf)?;
        parse(&buf[..n], want - 1)
    }
}

/// The counts of a group read, checked against the number of events opened.
fn parse(buf: &[u8], events: usize) -> io::Result<Vec<u64>> {
    let words: Vec<u64> = buf
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    match words.split_first() {
        Some((&nr, values)) if nr as usize == events && values.len() == events => {
            Ok(values.to_vec())
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a group read of {} bytes is not {events} counts", buf.len()),
        )),
    }
}

fn open_one(tid: i32, config: u64, leader: Option<&File>) -> io::Result<File> {
    let mut attr = perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        type_: PERF_TYPE_SOFTWARE,
        config,
        read_format: u64::from(PERF_FORMAT_GROUP),
        ..perf_event_attr::default()
    };
    // The group is enabled and disabled through its leader; members follow it.
    attr.set_disabled(u64::from(leader.is_none()));
    attr.set_exclude_hv(1);
    let group_fd = leader.map_or(-1, AsRawFd::as_raw_fd);
    // SAFETY: `attr` is a fully initialised perf_event_attr whose `size` is its own; a
    // software counting event (no sampling, no mmap) on another thread.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            tid,
            -1,
            group_fd,
            std::os::raw::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn check(rc: std::os::raw::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use perf_event_open_sys::bindings::{
        PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_MIGRATIONS, PERF_COUNT_SW_PAGE_FAULTS,
    };

    use super::*;

    /// A thread of this process: its id, the sender that lets it run `work`, its handle.
    fn thread(
        work: impl FnOnce() + Send + 'static,
    ) -> (
        u32,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            // /proc/thread-self is "PID/task/TID".
            let link = std::fs::read_link("/proc/thread-self").unwrap();
            tx.send(link.file_name().unwrap().to_str().unwrap().parse().unwrap())
                .unwrap();
            go_rx.recv().unwrap();
            work();
        });
        (rx.recv().unwrap(), go_tx, worker)
    }

    #[test]
    fn a_group_counts_its_events_together_on_another_thread() {
        // Counted: about 200 sleeps, each a context switch (most of them; see perf.rs).
        let (tid, go_tx, worker) = thread(|| {
            for _ in 0..200 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let configs = [
            u64::from(PERF_COUNT_SW_CONTEXT_SWITCHES),
            u64::from(PERF_COUNT_SW_PAGE_FAULTS),
            u64::from(PERF_COUNT_SW_CPU_MIGRATIONS),
        ];
        let mut g = Group::open(tid, &configs).unwrap();
        assert_eq!(g.read().unwrap(), [0, 0, 0], "opened disabled");
        g.reset().unwrap();
        g.enable().unwrap();
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        g.disable().unwrap();
        let counts = g.read().unwrap();
        assert!(counts[0] >= 100, "{counts:?}");
        assert_eq!(counts.len(), 3);
        g.reset().unwrap();
        assert_eq!(g.read().unwrap()[0], 0, "reset");
    }

    /// The premise of `perf::may_be_new`: a group whose thread exited still resets, enables
    /// and reads without an error, and counts nothing, so only its thread id's history tells
    /// it from a live one.
    #[test]
    fn a_group_whose_thread_exited_still_enables_and_counts_nothing() {
        // Alive until its group is open, then it ends.
        let (tid, go_tx, worker) = thread(|| {});
        let mut g = Group::open(tid, &[u64::from(PERF_COUNT_SW_CONTEXT_SWITCHES)]).unwrap();
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        // Gone from the process's task list only once the kernel has reaped it.
        let task = format!("/proc/self/task/{tid}");
        for _ in 0..1000 {
            if !std::path::Path::new(&task).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!std::path::Path::new(&task).exists(), "{task} still there");
        g.reset().unwrap();
        g.enable().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        g.disable().unwrap();
        assert_eq!(g.read().unwrap(), [0]);
    }

    #[test]
    fn short_or_mismatched_reads_are_errors() {
        let words = |w: &[u64]| w.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        assert_eq!(parse(&words(&[2, 5, 7]), 2).unwrap(), [5, 7]);
        assert!(parse(&words(&[3, 5, 7]), 2).is_err());
        assert!(parse(&words(&[2, 5]), 2).is_err());
        assert!(parse(&[], 2).is_err());
        assert!(parse(&[1, 2, 3], 0).is_err());
    }

    #[test]
    fn a_thread_that_does_not_exist() {
        let e = Group::open(i32::MAX as u32, &[u64::from(PERF_COUNT_SW_PAGE_FAULTS)]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(3), "ESRCH: {e}");
    }
}
