//! `baton sync`: send the offline queue now.

use crate::remote::{self, Timeouts};
use crate::{Ctx, write};

pub async fn run(ctx: &Ctx) -> anyhow::Result<()> {
    let (pending, _) = ctx.queue.counts();
    if pending == 0 {
        println!("nothing queued");
        return Ok(());
    }
    let mut hub = remote::connect(&ctx.settings, Timeouts::CLI).await?;
    let flushed = write::flush(&ctx.queue, &mut hub, None, None).await?;
    println!(
        "sent {}, refused {} (see `baton status`), still queued {}",
        flushed.sent, flushed.buried, flushed.left
    );
    for c in &flushed.conflicts {
        println!("conflict: {c}");
    }
    if flushed.left > 0 {
        anyhow::bail!("{} write(s) could not be sent yet; the hub may be down", flushed.left);
    }
    Ok(())
}
