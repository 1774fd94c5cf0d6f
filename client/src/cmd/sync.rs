//! `baton sync`: send the offline queue now.
//!
//! A flush leaves alone the entries another baton process is sending at that moment (a
//! hook's own write). `sync` is what a user runs to empty the queue, so it then waits for
//! those processes: an entry whose sender gave up (a hook's time budget, a hub that came
//! back mid-send) is an ordinary queued write again, and `sync` sends it too instead of
//! reporting an empty queue that is not.
//!
//! It also removes the temporary files writes cut short (a kill, a power cut) left in
//! Baton's folders.

use std::time::{Duration, Instant};

use crate::hub::remote::{self, Timeouts};
use crate::{ctx::Ctx, outbox::write};

/// How long `sync` waits for writes other processes are sending: longer than a detached
/// hook's budget, after which that process has given up.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(40);

pub async fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let config_dir = ctx.settings.config_file.parent().unwrap_or(&ctx.settings.data_dir);
    let swept = crate::fsperm::sweep_stale_temps(&ctx.settings.data_dir, 2)
        + crate::fsperm::sweep_stale_temps(config_dir, 0);
    if swept > 0 {
        println!(
            "removed {} left by interrupted writes",
            crate::text::count(swept, "temporary file", "temporary files")
        );
    }
    let (pending, _) = ctx.queue.counts();
    if pending == 0 {
        println!("nothing queued");
        return Ok(());
    }
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    let mut total = write::Flushed::default();
    let mut busy = 0;
    loop {
        let flushed = write::flush(&ctx.queue, &mut hub, None, None).await?;
        total.sent += flushed.sent;
        total.buried += flushed.buried;
        total.conflicts.extend(flushed.conflicts);
        total.left = flushed.left;
        if flushed.left > 0 || flushed.in_flight.is_empty() {
            break;
        }
        eprintln!(
            "waiting for {} another baton process is sending",
            crate::text::count(flushed.in_flight.len(), "write", "writes")
        );
        let mut released = Vec::new();
        for path in &flushed.in_flight {
            let path = path.clone();
            released.push(tokio::task::spawn_blocking(move || {
                crate::outbox::queue::wait_released(&path, deadline)
            }));
        }
        busy = 0;
        for r in released {
            if !r.await?? {
                busy += 1;
            }
        }
        if busy > 0 {
            break;
        }
    }
    println!(
        "sent {}, refused {} (see `baton status`), still queued {}",
        total.sent, total.buried, total.left
    );
    for c in &total.conflicts {
        println!("conflict: {c}");
    }
    if total.left > 0 {
        anyhow::bail!(
            "{} could not be sent yet; the hub may be down",
            crate::text::count(total.left, "write", "writes")
        );
    }
    if busy > 0 {
        anyhow::bail!(
            "{busy} write(s) are still being sent by another baton process after {}s; run `baton sync` again once it ends",
            IN_FLIGHT_WAIT.as_secs()
        );
    }
    Ok(())
}
