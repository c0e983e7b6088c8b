//! The probe's progress bar: drawn on stderr only when it is a terminal.

use std::{io::IsTerminal, sync::Mutex, time::Duration};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use powerdiag_agent::collect::ProbeObserver;

#[derive(Debug, Default)]
pub(crate) struct Bar {
    bar: Mutex<Option<ProgressBar>>,
}

impl Bar {
    pub(crate) fn new() -> Bar {
        Bar::default()
    }
}

impl ProbeObserver for Bar {
    fn begin(&self, index: &str, total: u64) {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("probing {msg} {wide_bar} {pos}/{len} queries")
        {
            bar.set_style(style);
        }
        bar.set_message(index.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar);
        }
    }

    fn step(&self) {
        if let Ok(b) = self.bar.lock()
            && let Some(bar) = b.as_ref()
        {
            bar.inc(1);
        }
    }

    fn end(&self) {
        if let Ok(mut b) = self.bar.lock()
            && let Some(bar) = b.take()
        {
            bar.finish_and_clear();
        }
    }
}
